package fleet

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/retry"
	"github.com/agentledger/ledger/internal/testkit"
)

// proc is one process of a test fleet: its own NATS connection, Fleet,
// guards and middleware.
type proc struct {
	name  string
	nc    *nats.Conn
	fleet *Fleet
	mw    *retry.Middleware
	sink  *retry.MemorySink
	logs  *testkit.Logs
}

// procConfig is what the processes of a test share.
type procConfig struct {
	guards    guard.Config
	policy    retry.Policy
	wait      time.Duration
	heartbeat time.Duration // default 200 ms
	connect   []nats.Option
}

// startProc starts a process of the fleet on the server at url.
func startProc(t *testing.T, url string, clk retry.Clock, name string, pc procConfig) *proc {
	t.Helper()
	opts := append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(20 * time.Millisecond), nats.Name(name)}, pc.connect...)
	nc, err := nats.Connect(url, opts...)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	p := &proc{name: name, nc: nc, sink: retry.NewMemorySink(), logs: &testkit.Logs{}}
	wait := pc.wait
	if wait == 0 {
		wait = 5 * time.Second // a loaded machine under -race: no degradation by accident
	}
	beat := pc.heartbeat
	if beat == 0 {
		beat = 200 * time.Millisecond
	}
	p.fleet, err = Open(nc, js, Options{Process: name, Wait: wait, Heartbeat: beat, Now: clk.Now,
		Logger: p.logs.TextLogger(slog.LevelInfo)})
	require.NoError(t, err)
	t.Cleanup(p.fleet.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	require.NoError(t, p.fleet.Ready(ctx))
	gc := pc.guards
	gc.Shared = p.fleet
	gc.Now = retry.GuardClock(clk)
	gs, err := guard.New(gc)
	require.NoError(t, err)
	policy := pc.policy
	if policy == (retry.Policy{}) {
		policy = retry.Policy{MaxRetries: 0, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond, HintCap: time.Hour}
	}
	p.mw, err = retry.New(retry.Options{Policy: policy, Sink: p.sink, Guards: gs, Clock: clk, Classifier: statusClassifier})
	require.NoError(t, err)
	return p
}

// refusing makes pc's calls refused at once while the fleet's probe is
// in flight, instead of waiting for its verdict (a HintCap below
// retry.ProbePoll), as the tests of the refusal need.
func refusing(pc procConfig) procConfig {
	pc.policy = retry.Policy{MaxRetries: 0, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond, HintCap: time.Millisecond}
	return pc
}

var testCall = retry.Call{SessionID: "sess-1", Provider: "anthropic", Model: "claude-fleet"}

const upstreamKey = "anthropic/claude-fleet"

// statusError stands for a provider's HTTP error.
type statusError struct {
	status int
	header map[string]string
}

func (e *statusError) Error() string { return "status " + strconv.Itoa(e.status) }

var statusClassifier = retry.ClassifierFunc(func(err error, now time.Time) (retry.Classification, bool) {
	var se *statusError
	if !errors.As(err, &se) {
		return retry.Classification{}, false
	}
	h := map[string][]string{}
	for k, v := range se.header {
		h[k] = []string{v}
	}
	return retry.ClassifyHTTP(se.status, h, now), true
})

// call makes one call of p whose attempts each run fn.
func (p *proc) call(fn func() error) error {
	_, err := retry.Do(context.Background(), p.mw, testCall, func(context.Context, retry.Attempt) (int, retry.Report, error) {
		return 0, retry.Report{}, fn()
	})
	return err
}

func fail503() error { return &statusError{status: 503} }

func succeed() error { return nil }

// eventually waits for cond, failing the test after a generous timeout.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 20*time.Second, 2*time.Millisecond, "timed out waiting until %s", what)
}

// counter counts the attempts that reach the "provider".
type counter struct{ n atomic.Int64 }

func (c *counter) wrap(fn func() error) func() error {
	return func() error { c.n.Add(1); return fn() }
}

// isOpen reports whether p's guard rejects the upstream now.
func (p *proc) isOpen() bool {
	return errors.Is(p.fleet.upstream(upstreamKey).Check(p.fleet.opts.Now()), breaker.ErrCircuitOpen)
}
