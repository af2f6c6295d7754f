package projection

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"

	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/pricing"
	"github.com/agentledger/ledger/internal/topology"
)

// RebuildConfig configures Rebuild.
type RebuildConfig struct {
	JS       jetstream.JetStream
	Topology topology.Config
	// Apply is the merge of the code doing the rebuild; nil is the
	// current (*Request).Apply.
	Apply ApplyFunc
	// LeaseTTL is the TTL of the rebuild's claim and of its hold on the
	// live lease; others judge them by it, as it judges theirs by their
	// own. Default 10s.
	LeaseTTL time.Duration
	// BatchSize of the scratch projection. Default: Config.BatchSize.
	BatchSize int
	Logger    *slog.Logger
	// Progress, when set, is called now and then with the events the
	// scratch projection has applied and the stream's last sequence.
	Progress func(phase string, applied, last uint64)
	// Catalog is this build's default price catalog (Config.Catalog). The
	// rebuild prices the whole history with the current catalog of
	// ledger_prices, and its switch records that version in the ledger.
	Catalog *pricing.Catalog
	// Rules is the RulesVersion of the code doing the rebuild; 0 is
	// RulesVersion. A seam for tests.
	Rules int
	// Now is the clock of the rebuild's leases. Default time.Now.
	Now func() time.Time
	// Faults is a test seam, as Config.Faults: called at the points of the
	// switch (SwitchPoints), before every renewal of the rebuild's leases,
	// and by the scratch projection.
	Faults func(FaultPoint) error
	// AcceptLoss rebuilds from the events the stream still holds when
	// some are gone (ErrStreamIncomplete, a GapError): every missing range
	// is recorded in ledger_state key names.LossKey (ReadLoss) before the
	// ledger is switched to a projection without them.
	AcceptLoss bool
}

// ErrRebuildRunning means another rebuild is running: there is one at a
// time.
var ErrRebuildRunning = errors.New("projection: another rebuild is running")

// ErrStreamIncomplete means LEDGER_ATTEMPTS no longer holds its first
// events (its MaxAge, or a purge), so the ledger cannot be recomputed
// from it.
var ErrStreamIncomplete = errors.New("projection: the stream no longer holds every event")

// Rebuild rebuilds the live ledger (ledger_requests, ledger_sessions and
// LEDGER_REJECTED) from the whole stream under the current code, while the
// live aggregator keeps running and publishers keep publishing:
//
//  1. It claims the rebuild (names.RebuildKey): a second rebuild is refused
//     while this one lives.
//  2. It deletes the scratch sets of earlier rebuilds that no recorded
//     switch needs, and projects the stream into its own scratch set
//     (ScratchNames of its ID) with the same exactly-once machinery as the
//     live aggregator, until it has caught up with the stream.
//  3. It asks the live lease holder to step aside (names.YieldKey), takes the
//     lease and begins a term (raising its fences), lets the scratch
//     projection catch up once more, and records the switch in the live
//     checkpoint.
//  4. It copies every scratch record over the live one (each write replaces
//     a whole record), deletes live records the new code does not have,
//     replaces the rejections, sets the live checkpoint to the scratch one
//     and releases the lease: the live aggregator resumes from there. Its
//     scratch set is deleted then.
//
// Every write of steps 3 and 4 is conditional on the term's fences, so a
// rebuild paused past the lease TTL cannot write once another holder has
// begun a term. An interruption before step 3 leaves the live ledger
// untouched; a new rebuild starts over. An interruption during step 4
// leaves the switch recorded, and whoever holds the lease next completes
// the copy. A stream whose first events are gone is refused.
func Rebuild(ctx context.Context, cfg RebuildConfig) error {
	if cfg.JS == nil {
		return fmt.Errorf("%w: JS is required", ErrInvalidConfig)
	}
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Progress == nil {
		cfg.Progress = func(string, uint64, uint64) {}
	}
	if cfg.Rules == 0 {
		cfg.Rules = RulesVersion
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	live, err := openResources(ctx, cfg.JS, cfg.Topology, LiveNames(), cfg.Catalog)
	if err != nil {
		return err
	}
	if err := checkWholeStream(ctx, live.stream); err != nil && !(cfg.AcceptLoss && errors.Is(err, ErrStreamIncomplete)) {
		return err
	}
	sid := ulid.Make().String()
	r := &rebuild{cfg: cfg, live: live, id: rebuildHolderPrefix + sid, scratchID: sid, scratch: ScratchNames(sid)}
	if cfg.AcceptLoss {
		r.acceptGap = func(from, to uint64) error {
			return recordLoss(ctx, live.state, LossRange{From: from, To: to, RecordedAt: cfg.Now().UTC(), By: r.id})
		}
	}
	// Losing the claim (paused past its TTL, another rebuild took it)
	// stops this one.
	parent := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	release, err := r.claim(ctx, cancel)
	if err != nil {
		return err
	}
	defer release()
	err = seam(cfg.Faults).hit(FaultRebuildClaimed)
	if err == nil {
		err = r.dropScratch(ctx)
	}
	if err == nil {
		err = r.run(ctx)
	}
	if ferr := seam(cfg.Faults).hit(FaultRebuildEnd); ferr != nil {
		err = ferr
	}
	var crash crashError
	if !errors.As(err, &crash) && !endedForGood(parent) {
		// Its own scratch set, unless a recorded switch still needs it.
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		if derr := r.dropScratch(dctx); derr != nil && err == nil {
			err = derr
		}
		dcancel()
	}
	if cause := context.Cause(ctx); err != nil && cause != nil && !errors.Is(cause, context.Canceled) {
		err = fmt.Errorf("%w (%v)", cause, err)
	}
	return err
}

// endedForGood reports whether ctx was ended with a cause of its own
// (such as the server's refusal of a permission), not a plain
// cancellation or deadline: then the clean-up, which asks the server
// again, would only wait out its timeout, and the next rebuild deletes
// the set instead.
func endedForGood(ctx context.Context) bool {
	c := context.Cause(ctx)
	return c != nil && !errors.Is(c, context.Canceled) && !errors.Is(c, context.DeadlineExceeded)
}

// rebuild is one run of Rebuild.
type rebuild struct {
	cfg       RebuildConfig
	live      *resources
	id        string // the instance ID of its leases: rebuildHolderPrefix + scratchID
	scratchID string
	scratch   Names // its own scratch set
	// acceptGap records a gap of the stream as lost (AcceptLoss); nil
	// stops the rebuild at a gap.
	acceptGap func(from, to uint64) error
}

// checkWholeStream refuses a stream that no longer starts at sequence 1.
func checkWholeStream(ctx context.Context, stream jetstream.Stream) error {
	info, err := stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("projection: reading %s: %w", names.AttemptsStream, err)
	}
	if first := info.State.FirstSeq; first > 1 {
		return fmt.Errorf("%w: %s starts at sequence %d, so events 1 to %d cannot be replayed (the stream's MaxAge or a purge removed them); a rebuild would drop their usage: restore the stream, or run the rebuild with --accept-loss to rebuild from what is left and record the loss",
			ErrStreamIncomplete, names.AttemptsStream, first, first-1)
	}
	return nil
}

// claim takes the rebuild claim and keeps it renewed until release; if it
// is lost meanwhile, lost is called.
func (r *rebuild) claim(ctx context.Context, lost context.CancelCauseFunc) (release func(), err error) {
	c := &lease{kv: r.live.state, key: names.RebuildKey, holder: r.id, ttl: r.cfg.LeaseTTL, now: r.cfg.Now, rules: r.cfg.Rules,
		fault: r.cfg.Faults, lenient: true}
	if err := c.claim(ctx, r.cfg.LeaseTTL/10); err != nil {
		if errors.Is(err, errHeld) {
			return nil, fmt.Errorf("%w (%v); wait for it to finish, or, if it died, its claim lapses once it has not been renewed for its TTL",
				ErrRebuildRunning, err)
		}
		return nil, err
	}
	kctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := c.keep(kctx); err != nil && kctx.Err() == nil {
			lost(fmt.Errorf("projection: this rebuild lost its claim: %w", err))
		}
	}()
	return func() {
		stop()
		<-done
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		c.release(rctx)
	}, nil
}

// run finishes a pending switch whose scratch copy is intact, or projects
// the stream anew and switches to it.
func (r *rebuild) run(ctx context.Context) error {
	// A rebuild paused past its claim finds it taken on resuming (its
	// renewals tell it too, a little later).
	if own, err := r.holdsClaim(ctx); err != nil || !own {
		return cmp.Or(err, errClaimLost)
	}
	cp, _, err := readCheckpoint(ctx, r.live.state)
	if err != nil {
		return err
	}
	if cp.Switch != nil {
		err := checkScratch(ctx, r.cfg.JS, cp.Switch)
		if err == nil {
			r.cfg.Logger.Info("rebuild: completing an interrupted switch")
			return r.holdAndSwitch(ctx, nil)
		}
		r.cfg.Logger.Warn("rebuild: the interrupted switch cannot be completed; rebuilding from the stream", "err", err)
	}
	// Created here, not by the scratch projection, which may be stopped
	// before it has started (an empty stream). Nobody else writes it.
	if _, err := openResources(ctx, r.cfg.JS, r.cfg.Topology, r.scratch, r.cfg.Catalog); err != nil {
		return err
	}
	if err := seam(r.cfg.Faults).hit(FaultScratchReady); err != nil {
		return err
	}
	scratch, err := New(Config{JS: r.cfg.JS, Topology: r.cfg.Topology, Names: r.scratch, Apply: r.cfg.Apply,
		BatchSize: r.cfg.BatchSize, InstanceID: r.id, LeaseTTL: r.cfg.LeaseTTL, Logger: r.cfg.Logger, Rules: r.cfg.Rules,
		Catalog: r.cfg.Catalog, Now: r.cfg.Now, Faults: r.cfg.Faults, AcceptGap: r.acceptGap})
	if err != nil {
		return err
	}
	sctx, stopScratch := context.WithCancel(ctx)
	defer stopScratch()
	scratchDone := make(chan error, 1)
	go func() { scratchDone <- scratch.Run(sctx) }()
	if err := catchUp(ctx, r.live.stream, scratch, scratchDone, "project", r.cfg.Progress); err != nil {
		return err
	}
	return r.holdAndSwitch(ctx, func() (uint64, error) {
		// Under the lease the live ledger is still: catch up once more, then
		// stop the scratch projection at a committed checkpoint.
		if err := catchUp(ctx, r.live.stream, scratch, scratchDone, "final", r.cfg.Progress); err != nil {
			return 0, err
		}
		stopScratch()
		if err := <-scratchDone; err != nil {
			return 0, err
		}
		return scratch.Applied(), nil
	})
}

// catchUp waits until agg has applied the stream's last sequence (read at
// the start).
func catchUp(ctx context.Context, stream jetstream.Stream, agg *Aggregator, done <-chan error, phase string, progress func(string, uint64, uint64)) error {
	info, err := stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("projection: reading %s: %w", names.AttemptsStream, err)
	}
	last := info.State.LastSeq
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for agg.Applied() < last {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-done:
			return fmt.Errorf("projection: the scratch projection stopped: %v", err)
		case <-t.C:
			progress(phase, agg.Applied(), last)
		}
	}
	progress(phase, agg.Applied(), last)
	return nil
}

// holdAndSwitch asks the live holder to yield, takes the lease, begins a
// term, records the switch (to the checkpoint finish returns; nil finish
// means the switch is recorded already) and completes it.
func (r *rebuild) holdAndSwitch(ctx context.Context, finish func() (uint64, error)) error {
	stopYield, err := r.askToYield(ctx)
	if err != nil {
		return err
	}
	defer stopYield()
	l := &lease{kv: r.live.state, holder: r.id, ttl: r.cfg.LeaseTTL, now: r.cfg.Now, rules: r.cfg.Rules, fault: r.cfg.Faults}
	r.cfg.Logger.Info("rebuild: waiting for the live aggregator to step aside")
	if err := l.acquire(ctx, l.ttl/10); err != nil {
		return err
	}
	id := l.rev
	// Hold the lease (renewing it) until the switch is done.
	kctx, stopKeep := context.WithCancelCause(ctx)
	keepDone := make(chan struct{})
	go func() {
		defer close(keepDone)
		if err := l.keep(kctx); err != nil {
			stopKeep(err)
		}
	}()
	stop := func(release bool) {
		stopKeep(nil)
		<-keepDone
		if release {
			l.release(context.WithoutCancel(ctx))
		}
	}
	t, err := beginTerm(kctx, r.live, l, id, r.cfg.Rules, r.cfg.Logger)
	if err != nil {
		stop(true)
		return err
	}
	if finish != nil {
		if err := r.recordSwitch(kctx, t, finish); err != nil {
			stop(true)
			return err
		}
	}
	err = completeSwitch(kctx, r.cfg.JS, r.live, t, r.cfg.Logger, r.cfg.Progress)
	_ = seam(r.cfg.Faults).hit(FaultTermEnd)
	if err != nil {
		// The switch stays recorded: whoever holds the lease next finishes it.
		stop(false)
		return err
	}
	stop(true)
	return nil
}

// askToYield asks the live lease holder to step aside and keeps asking
// (every TTL/3) until the returned function is called; a rebuild that
// dies lets the request go stale, and the live aggregator carries on.
func (r *rebuild) askToYield(ctx context.Context) (stop func(), err error) {
	state := r.live.state
	yval := mustJSON(leaseValue{Holder: r.id, TTL: r.cfg.LeaseTTL, Rules: r.cfg.Rules})
	if _, err := state.Put(ctx, names.YieldKey, yval); err != nil {
		return nil, fmt.Errorf("projection: asking the live aggregator to yield: %w", err)
	}
	yctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(r.cfg.LeaseTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-yctx.Done():
				return
			case <-t.C:
				if seam(r.cfg.Faults).hit(FaultRenew) != nil {
					return
				}
				// Not canceled by stop: once stopped, no refresh is in
				// flight, so the request it then finds is the last one.
				pctx, pcancel := context.WithTimeout(context.WithoutCancel(yctx), r.cfg.LeaseTTL/3)
				_, _ = state.Put(pctx, names.YieldKey, yval)
				pcancel()
			}
		}
	}()
	return func() {
		cancel()
		<-done
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer dcancel()
		// Only its own request: another rebuild's may have replaced it.
		if e, err := state.Get(dctx, names.YieldKey); err == nil {
			var v leaseValue
			if json.Unmarshal(e.Value(), &v) == nil && v.Holder == r.id {
				_ = state.Delete(dctx, names.YieldKey, jetstream.LastRevision(e.Revision()))
			}
		}
	}, nil
}
