package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/names"
)

// Fleet is one process's view of the fleet's shared upstream state, and
// its guard.Shared backend. Create it with Open and stop it with Close;
// it is safe for concurrent use.
type Fleet struct {
	opts Options
	nc   *nats.Conn
	js   jetstream.JetStream

	start  time.Time       // when Open was called
	ctx    context.Context // ends at Close, once the owed writes are made
	cancel context.CancelFunc
	wg     sync.WaitGroup // the watchers
	maint  sync.WaitGroup // the maintainer
	stop   chan struct{}  // closed by Close: the maintainer returns after the write under way

	closing atomic.Bool

	healthy   atomic.Bool
	writes    atomic.Uint64
	conflicts atomic.Uint64
	degraded  atomic.Uint64
	processes atomic.Int64 // live processes, frozen while degraded
	epoch     atomic.Uint64
	kv        atomic.Pointer[kvRef]

	mu        sync.Mutex
	upstreams map[string]*upstream
	beats     map[string]time.Time // heartbeat by process
	heard     map[string]time.Time // when the watcher last delivered each process's heartbeat (real clock)
	synced    uint64               // the epoch whose watcher has caught up
	watcher   jetstream.KeyWatcher
	resyncDue bool
	quietTill time.Time // no restore before it (real time), after a degradation

	dirty chan *upstream // upstreams with writes to make
	kick  chan struct{}  // wakes the maintainer
}

// kvRef holds the bucket handle of the current epoch.
type kvRef struct{ kv jetstream.KeyValue }

// Open starts the process's view of the shared state on nc. It returns at
// once: the Fleet is unhealthy (every decision local) until it has the
// bucket and its watcher has caught up, which Ready waits for. An error
// is returned only for invalid options.
func Open(nc *nats.Conn, js jetstream.JetStream, opts Options) (*Fleet, error) {
	if nc == nil || js == nil {
		return nil, fmt.Errorf("%w: a NATS connection and its JetStream context are required", ErrInvalidOptions)
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &Fleet{
		opts: opts, nc: nc, js: js, ctx: ctx, cancel: cancel, start: opts.Now(),
		upstreams: make(map[string]*upstream), beats: make(map[string]time.Time), heard: make(map[string]time.Time),
		dirty: make(chan *upstream, 1024), kick: make(chan struct{}, 1), resyncDue: true, stop: make(chan struct{}),
	}
	f.processes.Store(1)
	status := nc.StatusChanged(nats.CONNECTED, nats.DISCONNECTED, nats.RECONNECTING, nats.CLOSED)
	f.maint.Go(func() { f.maintain(status) })
	f.wake()
	return f, nil
}

// Process is the name of this process in the shared state.
func (f *Fleet) Process() string { return f.opts.Process }

// Ready waits until the Fleet is healthy or ctx ends.
func (f *Fleet) Ready(ctx context.Context) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for !f.healthy.Load() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("fleet: the shared state is not ready: %w", context.Cause(ctx))
		case <-t.C:
		}
	}
	return nil
}

// abandon closes a Fleet that never became ready: no call went through
// it, so it owes the fleet nothing, and the maintainer's request in
// flight (one the server refused, say) is cut rather than waited for.
func (f *Fleet) abandon() {
	f.cancel()
	f.Close()
}

// Close leaves the fleet without losing what this process owes it. It
// stops the maintainer after the write it is making (a write is never cut
// short), then, under a fresh timeout of its own (CloseTimeout), writes
// what is still owed: a probe's result, failure reports, holds, learned
// limits, the batched first attempts. A probe this process still holds
// (its call still under way) is given up: the breaker reopens with its
// cooldown already over, so that another process may probe at once.
// Then it removes the heartbeat and stops the watcher. Calls made during
// and after Close decide with this process's state alone. It is safe to
// call more than once.
func (f *Fleet) Close() {
	if !f.closing.CompareAndSwap(false, true) {
		return
	}
	close(f.stop)
	f.maint.Wait()
	healthy := f.healthy.Swap(false) // from now on every decision is local
	if ref := f.kv.Load(); ref != nil && healthy {
		ctx, cancel := context.WithTimeout(context.Background(), f.closeTimeout())
		for _, u := range f.snapshot() {
			if err := u.leave(ctx); err != nil {
				f.opts.Logger.Warn("fleet: closing: a write this process owed the fleet was not made",
					slog.String("upstream", u.name), slog.String("process", f.opts.Process), slog.Any("error", err))
			}
		}
		_ = ref.kv.Delete(ctx, key(names.UpstreamProcess, f.opts.Process))
		cancel()
	}
	f.cancel()
	f.wg.Wait() // the watch goroutine ends with the context
	f.mu.Lock()
	w := f.watcher
	f.watcher = nil
	f.mu.Unlock()
	// Stopping the watcher deletes its consumer with a request that waits
	// up to 5 s for a server that is gone; a disconnected connection drops
	// the subscription when it closes, and the server the consumer.
	if w != nil && f.nc.Status() == nats.CONNECTED {
		_ = w.Stop()
	}
}

// CloseTimeout is the bound of the writes Close makes: four times
// Options.Wait, at least one second.
func (o Options) CloseTimeout() time.Duration { return max(4*o.Wait, time.Second) }

func (f *Fleet) closeTimeout() time.Duration { return f.opts.CloseTimeout() }

// alive reports whether the process p is alive: this one, or one whose
// heartbeat the watcher delivered within three heartbeats (on this
// process's real clock, so that a clock that jumps, or a test's, does not
// kill anyone). A process SIGKILLed stops its heartbeat, and the probe it
// held is free within three heartbeats.
func (f *Fleet) alive(p string) bool {
	if p == f.opts.Process {
		return true
	}
	f.mu.Lock()
	t, ok := f.heard[p]
	f.mu.Unlock()
	return ok && time.Since(t) <= 3*f.opts.Heartbeat
}

// Stats are a Fleet's counters since Open.
type Stats struct {
	Writes    uint64 // records written by compare-and-set
	Conflicts uint64 // compare-and-sets that lost to another writer (each costs a read)
	Degraded  uint64 // times the shared state became unavailable
}

// Stats returns a snapshot of the counters.
func (f *Fleet) Stats() Stats {
	return Stats{Writes: f.writes.Load(), Conflicts: f.conflicts.Load(), Degraded: f.degraded.Load()}
}

// Healthy implements guard.Shared.
func (f *Fleet) Healthy() bool { return f.healthy.Load() }

// Processes implements guard.Shared: the processes whose heartbeat is
// recent, this one included; while degraded, the count when it happened.
func (f *Fleet) Processes() int { return int(f.processes.Load()) }

// Upstream implements guard.Shared.
func (f *Fleet) Upstream(name string, p guard.Params) guard.SharedUpstream {
	u := f.upstream(name)
	u.mu.Lock()
	u.params = p
	u.mu.Unlock()
	return u
}

// upstream returns the state of the upstream name, creating it.
func (f *Fleet) upstream(name string) *upstream {
	f.mu.Lock()
	defer f.mu.Unlock()
	u := f.upstreams[name]
	if u == nil {
		u = newUpstream(f, name)
		f.upstreams[name] = u
	}
	return u
}

// bucket returns the bucket handle, or nil before the first sync.
func (f *Fleet) bucket() jetstream.KeyValue {
	if ref := f.kv.Load(); ref != nil {
		return ref.kv
	}
	return nil
}

// wake asks the maintainer to look at the state of things.
func (f *Fleet) wake() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// degrade makes every decision local until the shared state is back, and
// logs the change once.
func (f *Fleet) degrade(reason string, resync bool) {
	f.mu.Lock()
	f.quietTill = time.Now().Add(f.opts.Heartbeat) // pacing, on the real clock like the maintainer's ticker
	if resync {
		f.resyncDue = true
	}
	f.mu.Unlock()
	if f.healthy.CompareAndSwap(true, false) {
		f.degraded.Add(1)
		f.opts.Logger.Warn("fleet: the shared upstream state is unavailable; each process decides alone (its own breaker, its share of the rate limits, its own retry budget) until it is back",
			slog.String("reason", reason), slog.String("process", f.opts.Process), slog.Int("processes", f.Processes()))
	}
	f.wake()
}

// failed turns the error of a shared operation into the Guard's
// ErrUnavailable and degrades the Fleet (a compare-and-set lost too often
// is no failure of NATS: the callers answer it conservatively instead).
func (f *Fleet) failed(op string, err error) error {
	if !errors.Is(err, errContended) && !f.closing.Load() { // closing is no failure
		f.degrade(op+": "+err.Error(), !errors.Is(err, context.DeadlineExceeded))
	}
	return fmt.Errorf("%w: %s: %w", guard.ErrUnavailable, op, err)
}

// withWait is a context for an operation on a call's path.
func (f *Fleet) withWait() (context.Context, context.CancelFunc) {
	return context.WithTimeout(f.ctx, f.opts.Wait)
}
