package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/provider/fakekit"
	"github.com/agentledger/ledger/internal/retry"
	"github.com/agentledger/ledger/internal/sim/fakeprovider"
)

// ErrAlreadyRun is returned by Run when the fleet has run before: a Fleet
// runs once.
var ErrAlreadyRun = errors.New("sim: fleet already run")

// Result is the outcome of a run.
type Result struct {
	// Truth is the fake provider's ground truth: what it charged; nil
	// when the provider is another process's (Config.ProviderURL).
	Truth *fakeprovider.Truth `json:"truth"`
	// Counts are the fleet's own figures.
	Counts Counts `json:"counts"`
	// Elapsed is how long the run took.
	Elapsed time.Duration `json:"elapsed_ns"`
}

// Fleet is a simulated fleet of agents. Create it with New and run it once
// with Run; Progress may be called from any goroutine meanwhile.
type Fleet struct {
	cfg      Config
	dialects []*fakekit.Dialect // the providers the fleet can call
	logger   *slog.Logger
	ran      atomic.Bool

	callsDone      atomic.Int64
	callsSucceeded atomic.Int64
	callsFailed    atomic.Int64
	sink           *countingSink
}

// New validates cfg and returns a fleet ready to run. It returns a
// *ConfigError (wrapping ErrInvalidConfig) naming the first field that
// breaks its rule.
func New(cfg Config) (*Fleet, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Fleet{cfg: cfg, dialects: dialects(), logger: logger, sink: newCountingSink(cfg.Sink)}, nil
}

// Config returns the fleet's configuration, defaults applied.
func (f *Fleet) Config() Config { return f.cfg }

// CallsTotal is the number of logical calls a complete run makes.
func (f *Fleet) CallsTotal() int64 {
	return int64(f.cfg.Shard.sessions(f.cfg.Sessions)) * int64(f.cfg.CallsPerSession)
}

// Progress returns a snapshot of the run so far.
func (f *Fleet) Progress() Progress {
	return Progress{
		CallsDone:  f.callsDone.Load(),
		CallsTotal: f.CallsTotal(),
		Attempts:   f.sink.attempts.Load(),
		SinkErrors: f.sink.sinkErrors.Load(),
	}
}

// Run starts the fake provider and the agents, waits until every session is
// done or ctx ends, stops the provider and returns the result. Every
// goroutine it starts has returned when it returns. When ctx ends first the
// agents stop after their current call (whose last attempt is recorded as
// canceled) and Run returns the partial result with ctx's error. Calls that
// fail (a bad request, retries exhausted) are part of the simulation, not
// errors of Run.
func (f *Fleet) Run(ctx context.Context) (*Result, error) {
	if !f.ran.CompareAndSwap(false, true) {
		return nil, ErrAlreadyRun
	}
	begin := time.Now()
	ds := f.dialects
	root := f.cfg.ProviderURL
	var srv *fakeprovider.Server
	if root == "" {
		var err error
		srv, err = fakeprovider.New(fakeprovider.Options{Seed: f.cfg.Seed, Mix: f.cfg.Mix, Tier: f.cfg.Tier, Outage: f.cfg.Outage, Dialects: ds})
		if err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
		defer srv.Close()
		root = srv.URL()
	}

	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = f.cfg.Agents
	defer transport.CloseIdleConnections()
	hc := &http.Client{Transport: transport}

	callers, classifier, err := newCallers(ctx, ds, root, hc)
	if err != nil {
		return nil, err
	}
	breakers := f.cfg.Breakers
	if breakers == nil && f.cfg.Guards == nil {
		if breakers, err = breaker.NewGroup(breaker.Config{FailureThreshold: math.MaxInt}); err != nil {
			return nil, fmt.Errorf("sim: breakers: %w", err)
		}
	}
	mw, err := retry.New(retry.Options{
		Policy:     f.cfg.Policy,
		Classifier: classifier,
		Sink:       f.sink,
		Breakers:   breakers,
		Guards:     f.cfg.Guards,
		Rand:       retry.LockedRand(f.cfg.Seed, 0x5157),
		Logger:     f.logger,
	})
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}

	var next atomic.Int64 // the next session to work on
	var wg sync.WaitGroup
	for range f.cfg.Agents {
		wg.Go(func() {
			for ctx.Err() == nil {
				j := int(next.Add(1) - 1)
				if j >= f.cfg.Shard.sessions(f.cfg.Sessions) {
					return
				}
				f.session(ctx, mw, callers, f.cfg.Shard.session(j))
			}
		})
	}
	wg.Wait()
	res := &Result{Elapsed: time.Since(begin)}
	if srv != nil {
		// Close waits for the server's handlers, so the truth is final: it
		// includes a request that reached the server after its client
		// gave up.
		srv.Close()
		res.Truth = srv.Truth()
	}
	res.Counts = Counts{
		Calls:          f.callsSucceeded.Load() + f.callsFailed.Load(),
		CallsSucceeded: f.callsSucceeded.Load(),
		CallsFailed:    f.callsFailed.Load(),
	}
	f.sink.fill(&res.Counts)
	res.Counts.Waits = int64(mw.Stats().Waits)
	return res, ctx.Err()
}

// think waits Config.Think, or until ctx ends.
func (f *Fleet) think(ctx context.Context) {
	if f.cfg.Think <= 0 {
		return
	}
	t := time.NewTimer(f.cfg.Think)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// session runs the calls of session i one after the other.
func (f *Fleet) session(ctx context.Context, mw *retry.Middleware, callers map[string]fakekit.Caller, i int) {
	provider := f.cfg.Providers[i%len(f.cfg.Providers)]
	c := callers[provider]
	d, _ := dialectOf(f.dialects, provider) // withDefaults checked it
	sid := sessionID(f.cfg.RunID, i)
	for j := range f.cfg.CallsPerSession {
		if ctx.Err() != nil {
			return
		}
		call := retry.Call{SessionID: sid, RequestID: requestID(f.cfg.RunID, i, j), Provider: provider, Model: d.Sim.Model,
			Labels: sessionLabels(i)}
		prompt := fmt.Sprintf("Simulated prompt %d of session %s.", j+1, sid)
		_, err := retry.Do(ctx, mw, call, func(ctx context.Context, a retry.Attempt) (struct{}, retry.Report, error) {
			rep, err := c.Call(ctx, prompt, a)
			return struct{}{}, rep, err
		})
		f.callsDone.Add(1)
		f.think(ctx)
		if err == nil {
			f.callsSucceeded.Add(1)
			continue
		}
		f.callsFailed.Add(1)
		var ce *retry.CallError
		if !errors.As(err, &ce) {
			// Not a call that failed but one that was refused: a bug.
			f.logger.Error("sim: call refused", slog.String("request_id", call.RequestID), slog.Any("error", err))
		}
	}
}
