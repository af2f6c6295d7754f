package projection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/pricebook"
	"github.com/agentledger/ledger/internal/pricing"
	"github.com/agentledger/ledger/internal/topology"
)

// ErrInvalidConfig is wrapped by every configuration error of New.
var ErrInvalidConfig = errors.New("projection: invalid config")

// ErrInvariant means the projection found its stored state inconsistent
// with the protocol described in the package comment. It stops the
// aggregator rather than write a wrong ledger.
var ErrInvariant = errors.New("projection: invariant violated")

// Names are the JetStream resources an Aggregator projects into. The zero
// value is the live ledger of wire contract v1.
type Names struct {
	Requests, Sessions, State string // KV buckets
	Rejected                  string // stream of rejections
	RejectedPrefix            string // its subject prefix, ending in "."
	// Rollups is the KV bucket of the rollups per cell; "" writes none
	// (a ledger without rollups, which only the benchmark's comparison
	// projects). LiveNames and ScratchNames always name one.
	Rollups string
}

// LiveNames are the resources of the live ledger.
func LiveNames() Names {
	return Names{Requests: names.RequestsBucket, Sessions: names.SessionsBucket, State: names.StateBucket,
		Rejected: names.RejectedStream, RejectedPrefix: names.RejectedPrefix, Rollups: names.RollupsBucket}
}

func (n Names) orLive() Names {
	if n == (Names{}) {
		return LiveNames()
	}
	return n
}

// Config configures an Aggregator. JS is required; the rest has defaults.
type Config struct {
	JS       jetstream.JetStream
	Topology topology.Config
	// Names are the resources to project into; zero is the live ledger.
	Names Names
	// BatchSize is the most events applied in one batch. Default
	// DefaultBatchSize (20,000):
	// large batches coalesce more writes per key (a session touched by many
	// events of a batch is written once); a quiet stream makes small ones.
	// Two batches are in memory at once (one committing, one prepared),
	// plus a batch of decoded read-ahead.
	BatchSize int
	// InstanceID names this instance in the lease. Default: a new ULID, so
	// that a restarted process waits for its predecessor's lease to lapse.
	InstanceID string
	// LeaseTTL is how long a silent lease holder keeps the lease. Default 10s.
	LeaseTTL time.Duration
	// CacheSize bounds the records kept in memory. Default 20,000: attempts
	// of one call mostly land in one batch, so the cache serves retries that
	// straddle batches, and memory stays bounded whatever the number of keys.
	CacheSize int
	// RetryDelay is the pause after a failed batch before starting again
	// from the checkpoint. Default 500ms.
	RetryDelay time.Duration
	// AckWait is how long a batch waits for the server's next answer to
	// its reads and writes, and the consumer for a heartbeat, before the
	// batch is abandoned and the work starts again from the checkpoint: a
	// stream's leader that dies is noticed within it. Default
	// DefaultAckWait (5s).
	AckWait time.Duration
	Logger  *slog.Logger
	// Now is the clock, for the lease. Default time.Now.
	Now func() time.Time
	// Apply merges an accepted event into a request record; nil selects
	// Priced(the catalog the ledger records). It is a seam for tests that replay a stream
	// projected by a deliberately wrong version of the code.
	Apply ApplyFunc
	// Catalog is this build's default price catalog; nil is
	// pricing.Default(). The ledger prices with the catalog version its
	// checkpoint records (see package pricebook), rebuilt from it; it is a
	// seam for tests of a build with other default prices.
	Catalog *pricing.Catalog
	// Observer, when set, is told of every committed batch and every
	// recorded rejection, for metrics.
	Observer Observer
	// Rules is the RulesVersion this aggregator applies; 0 is RulesVersion.
	// It is a seam for tests of an older or newer build.
	Rules int
	// Faults, when set, is called at every write point of a batch, at the
	// pause points (PausePoints) and before every lease renewal. An error
	// it returns stops Run at once without any cleanup, as a crash would;
	// blocking in it freezes the caller there, as a stopped process would.
	// It is a test seam and may be called from several goroutines.
	Faults func(p FaultPoint) error
	// AcceptGap, when set, is called with every gap in the stream (events
	// From through To missing past the checkpoint, see GapError) instead
	// of stopping: nil from it goes on without them. Only a rebuild run
	// with --accept-loss sets it, to record the loss in the live ledger.
	AcceptGap func(from, to uint64) error
}

// DefaultBatchSize is Config.BatchSize's default, the batch size the
// benchmarks measure; aggregator run's --batch defaults to it.
const DefaultBatchSize = 20_000

// Observer is told of every committed batch and every recorded
// rejection, on the aggregator's goroutines: its methods must be quick,
// safe for concurrent use, and should not allocate.
type Observer interface {
	// BatchCommitted is called once a batch's checkpoint is written: it
	// applied events events and took took from its first event in hand
	// to its checkpoint.
	BatchCommitted(events int, took time.Duration)
	// Rejected is called once for each event recorded in the rejection
	// stream, with its reason.
	Rejected(reason string)
}

// FaultPoint names a write point of the batch commit.
type FaultPoint string

// The write points of a batch, in order.
const (
	FaultBeforeWrites      FaultPoint = "before-writes"
	FaultMidRequests       FaultPoint = "mid-requests"
	FaultBetweenBuckets    FaultPoint = "between-buckets"
	FaultMidSessions       FaultPoint = "mid-sessions"
	FaultAfterSessions     FaultPoint = "after-sessions"
	FaultMidRollups        FaultPoint = "mid-rollups"
	FaultBeforeCheckpoint  FaultPoint = "before-checkpoint"
	FaultAfterCheckpoint   FaultPoint = "after-checkpoint"
	FaultAfterRejects      FaultPoint = "after-rejects"
	FaultBetweenRejectsPut FaultPoint = "mid-rejects"
)

// FaultPoints lists every write point, for tests that crash at each.
var FaultPoints = []FaultPoint{FaultBetweenRejectsPut, FaultAfterRejects, FaultBeforeWrites, FaultMidRequests,
	FaultBetweenBuckets, FaultMidSessions, FaultAfterSessions, FaultMidRollups, FaultBeforeCheckpoint, FaultAfterCheckpoint}

// Points where a holder can be frozen in the middle of a batch (besides
// the write points), and the lease renewal.
const (
	FaultGather       FaultPoint = "gather"        // a batch's first message is in hand; the rest is gathered next
	FaultAfterRead    FaultPoint = "after-read"    // a batch is gathered from the stream
	FaultAfterLoad    FaultPoint = "after-load"    // its records are read, before they are applied
	FaultNextPrepared FaultPoint = "next-prepared" // batch N+1 is prepared while N commits
	FaultRenew        FaultPoint = "renew"         // before every lease renewal
	FaultTermEnd      FaultPoint = "term-end"      // the batches of a lease term have stopped
)

// The points of a rebuild before it projects (besides the renewals of its
// claim).
const (
	FaultRebuildClaimed FaultPoint = "rebuild-claimed" // the claim is held, leftover scratch sets not yet deleted
	FaultScratchReady   FaultPoint = "scratch-ready"   // its own scratch set is created, the scratch projection not yet started
	FaultRebuildEnd     FaultPoint = "rebuild-end"     // it has stopped, its scratch set not yet deleted
)

// The points of a rebuild's switch (besides the lease renewals).
const (
	FaultSwitchRecorded   FaultPoint = "switch-recorded"   // the switch is recorded, nothing copied yet
	FaultSwitchCopy       FaultPoint = "switch-copy"       // after each chunk of records copied
	FaultSwitchRejections FaultPoint = "switch-rejections" // the live rejections are purged, the new ones not yet written
	FaultSwitchCheckpoint FaultPoint = "switch-checkpoint" // everything is copied but the checkpoint
)

// SwitchPoints lists the points of a switch where the pause tests freeze
// a rebuild.
var SwitchPoints = []FaultPoint{FaultSwitchRecorded, FaultSwitchCopy, FaultSwitchRejections, FaultSwitchCheckpoint}

// PausePoints lists the points of a batch where the pause tests freeze a
// holder.
var PausePoints = []FaultPoint{FaultAfterRead, FaultAfterLoad, FaultBetweenBuckets, FaultAfterSessions, FaultBeforeCheckpoint, FaultNextPrepared}

// seam is Config.Faults; nil in production.
type seam func(FaultPoint) error

// hit calls the seam at p; an error it returns is a crash.
func (s seam) hit(p FaultPoint) error {
	if s == nil {
		return nil
	}
	if err := s(p); err != nil {
		return crashError{err}
	}
	return nil
}

// crashError marks an error returned by Config.Faults.
type crashError struct{ err error }

func (c crashError) Error() string { return c.err.Error() }
func (c crashError) Unwrap() error { return c.err }

// Aggregator projects LEDGER_ATTEMPTS into ledger_requests and
// ledger_sessions, exactly once per accepted event.
type Aggregator struct {
	cfg     Config
	log     *slog.Logger
	applied atomic.Uint64
	leading atomic.Bool
	stats   struct {
		events, rejected, batches atomic.Uint64
		gap                       atomic.Uint64
	}
}

// New checks the configuration and returns an Aggregator. It does no I/O.
func New(cfg Config) (*Aggregator, error) {
	if cfg.JS == nil {
		return nil, fmt.Errorf("%w: JS is required", ErrInvalidConfig)
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.BatchSize < 1 || cfg.BatchSize > 100_000 {
		return nil, fmt.Errorf("%w: BatchSize %d must be 1 to 100000", ErrInvalidConfig, cfg.BatchSize)
	}
	if cfg.InstanceID == "" {
		cfg.InstanceID = ulid.Make().String()
	}
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = 10 * time.Second
	}
	if cfg.LeaseTTL < 30*time.Millisecond {
		return nil, fmt.Errorf("%w: LeaseTTL %s must be at least 30ms", ErrInvalidConfig, cfg.LeaseTTL)
	}
	if cfg.CacheSize == 0 {
		cfg.CacheSize = 20_000
	}
	if cfg.CacheSize < 0 {
		return nil, fmt.Errorf("%w: CacheSize %d must not be negative", ErrInvalidConfig, cfg.CacheSize)
	}
	if cfg.RetryDelay == 0 {
		cfg.RetryDelay = 500 * time.Millisecond
	}
	if cfg.AckWait == 0 {
		cfg.AckWait = DefaultAckWait
	}
	if cfg.AckWait < 10*time.Millisecond {
		return nil, fmt.Errorf("%w: AckWait %s must be at least 10ms", ErrInvalidConfig, cfg.AckWait)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rules == 0 {
		cfg.Rules = RulesVersion
	}
	cfg.Names = cfg.Names.orLive()
	return &Aggregator{cfg: cfg, log: cfg.Logger}, nil
}

// Applied is the stream sequence up to which every event has been applied
// by this instance (0 before the first batch).
func (a *Aggregator) Applied() uint64 { return a.applied.Load() }

// Leading reports whether this instance holds the lease now.
func (a *Aggregator) Leading() bool { return a.leading.Load() }

// Stats are counters since New.
type Stats struct {
	Events, Rejected, Batches uint64
	// GapEvents is how many events were missing in the last gap this
	// process found in the stream (GapError); 0 if none.
	GapEvents uint64
}

// Stats returns the counters.
func (a *Aggregator) Stats() Stats {
	return Stats{Events: a.stats.events.Load(), Rejected: a.stats.rejected.Load(), Batches: a.stats.batches.Load(),
		GapEvents: a.stats.gap.Load()}
}

// Run ensures the stream and buckets exist, waits for the lease, and
// projects events until ctx ends. On shutdown it finishes and commits the
// batch in hand, releases the lease and returns nil. A failed batch (lost
// connection, write conflict) is abandoned and the work resumes from the
// last checkpoint; losing the lease sends the instance back to standby.
func (a *Aggregator) Run(ctx context.Context) error {
	res, err := openResources(ctx, a.cfg.JS, a.cfg.Topology, a.cfg.Names, a.cfg.Catalog)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		return err
	}
	for _, b := range []*bucket{res.requests, res.sessions, res.stateW, res.rollups} {
		if b != nil {
			b.wait = a.cfg.AckWait
		}
	}
	for {
		err := a.lead(ctx, res)
		var crash crashError
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.As(err, &crash):
			return err
		case errors.Is(err, ErrInvariant), errors.Is(err, ErrRulesTooOld), errors.Is(err, ErrGap), errors.Is(err, pricebook.ErrUnavailable):
			return err
		case errors.Is(err, ErrYield):
			a.log.Info("aggregator: standing by while a rebuild switches the ledger over")
		case err != nil:
			a.log.Warn("aggregator: batch abandoned; resuming from checkpoint", "err", err)
		}
		t := time.NewTimer(a.cfg.RetryDelay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// resources are the JetStream objects the aggregator works on.
type resources struct {
	names              Names
	stream             jetstream.Stream
	rejected           jetstream.Stream
	requests, sessions *bucket
	rollups            *bucket // nil when Names.Rollups is ""
	state              jetstream.KeyValue
	stateW             *bucket // the state bucket, for the checkpoint write
	book               *pricebook.Book
}

// readAhead bounds the messages the consumer fetches ahead of the
// batches, undecoded.
const readAhead = 10_000

func openResources(ctx context.Context, js jetstream.JetStream, tc topology.Config, names Names, base *pricing.Catalog) (*resources, error) {
	stream, err := topology.EnsureAttempts(ctx, js, tc)
	if err != nil {
		return nil, err
	}
	rejected, err := topology.EnsureRejectedAs(ctx, js, tc, names.Rejected, names.RejectedPrefix+">")
	if err != nil {
		return nil, err
	}
	req, err := topology.EnsureBucket(ctx, js, tc, names.Requests, "Usage ledger: one record per request_id (dedup projection).")
	if err != nil {
		return nil, err
	}
	ses, err := topology.EnsureBucket(ctx, js, tc, names.Sessions, "Usage ledger: per-session rollups.")
	if err != nil {
		return nil, err
	}
	state, err := topology.EnsureBucket(ctx, js, tc, names.State, "Usage ledger: aggregator checkpoint and lease.")
	if err != nil {
		return nil, err
	}
	res := &resources{names: names, stream: stream, rejected: rejected, state: state}
	if res.book, err = pricebook.Open(ctx, js, tc, base); err != nil {
		return nil, err
	}
	if res.requests, err = newBucket(ctx, js, req); err != nil {
		return nil, err
	}
	if res.sessions, err = newBucket(ctx, js, ses); err != nil {
		return nil, err
	}
	if res.stateW, err = newBucket(ctx, js, state); err != nil {
		return nil, err
	}
	if names.Rollups != "" {
		rol, err := topology.EnsureBucket(ctx, js, tc, names.Rollups, "Usage ledger: rollups per hour, provider, model and labels.")
		if err != nil {
			return nil, err
		}
		if res.rollups, err = newBucket(ctx, js, rol); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// lead holds the lease and runs batches until ctx ends or a batch fails.
func (a *Aggregator) lead(ctx context.Context, res *resources) error {
	l := &lease{kv: res.state, holder: a.cfg.InstanceID, ttl: a.cfg.LeaseTTL, now: a.cfg.Now, rules: a.cfg.Rules, fault: a.cfg.Faults}
	if err := l.acquire(ctx, a.cfg.LeaseTTL/4); err != nil {
		return err
	}
	termID := l.rev
	a.leading.Store(true)
	defer a.leading.Store(false)
	a.log.Info("aggregator: holding the lease", "instance", a.cfg.InstanceID, "term", termID)

	// The lease keeper and the batch loop share a context: whichever fails
	// first stops the other.
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := l.keep(runCtx); err != nil {
			cancel(err)
		}
	}()
	t, err := beginTerm(runCtx, res, l, termID, a.cfg.Rules, a.log)
	if err == nil {
		err = a.loop(ctx, runCtx, res, t)
	}
	_ = seam(a.cfg.Faults).hit(FaultTermEnd)
	var crash crashError
	if !errors.As(err, &crash) {
		cancel(nil)
		wg.Wait()
		if ctx.Err() != nil || errors.Is(context.Cause(runCtx), ErrYield) || errors.Is(err, ErrRulesTooOld) || errors.Is(err, ErrGap) || errors.Is(err, pricebook.ErrUnavailable) {
			relCtx, relCancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			l.release(relCtx)
			relCancel()
		}
	} else {
		// A crash leaves the lease as it is, as a dead process would.
		cancel(err)
		wg.Wait()
	}
	if err == nil {
		err = context.Cause(runCtx)
	}
	return err
}

// loop consumes the stream from the checkpoint and applies batches in
// term t. ctx is the caller's (its end is a graceful stop); runCtx also
// ends when the lease is lost (then nothing more is written).
//
// One batch commits (on its own goroutine, see committer) while the next
// is gathered and prepared; it is sent once the previous one has
// committed. Whatever happens, the committing goroutine is waited for
// before loop returns, so a new term never overlaps an old write.
func (a *Aggregator) loop(ctx, runCtx context.Context, res *resources, t *term) error {
	b, err := a.newBatcher(runCtx, res, t)
	if err != nil {
		return err
	}
	// No silent gap: the stream must still hold the event after the
	// checkpoint (split checks every later one).
	if err := a.checkHead(runCtx, res, b.prepared); err != nil {
		return err
	}
	ahead, stopConsuming, err := a.consume(runCtx, res, t.cp.Seq)
	if err != nil {
		return err
	}
	defer stopConsuming()
	watch, err := a.watchPrices(runCtx, res)
	if err != nil {
		return err
	}
	defer watch.Stop()
	c := &committer{b: b, ctx: ctx, runCtx: runCtx}
	defer c.drain()
	batch := make([]fetched, 0, a.cfg.BatchSize)
	for {
		first, ok, err := c.await(ahead)
		if !ok {
			return err
		}
		inHand := time.Now()
		batch = append(batch[:0], first)
		if err := b.fault(FaultGather); err != nil {
			return err
		}
		batch = ahead.fill(batch, a.cfg.BatchSize)
		if err := b.fault(FaultAfterRead); err != nil {
			return err
		}
		if err := a.adoptPrices(runCtx, res, b, c, watch); err != nil {
			return err
		}
		j, err := b.prepare(runCtx, batch)
		if err != nil {
			return err
		}
		if err := c.next(j, inHand); err != nil {
			return err
		}
	}
}

// watchPrices watches the current catalog of ledger_prices for the
// term: nil (no watch) when Config.Apply replaces the pricing.
func (a *Aggregator) watchPrices(ctx context.Context, res *resources) (*pricebook.Watch, error) {
	if a.cfg.Apply != nil {
		return nil, nil
	}
	return res.book.WatchCurrent(ctx)
}

// adoptPrices lets a running term adopt a catalog loaded since it began
// (term.adopt), between two batches: once the batch in flight has
// committed (priced and checkpointed with the old version), the next one
// is priced with the new catalog and its checkpoint records it.
func (a *Aggregator) adoptPrices(ctx context.Context, res *resources, b *batcher, c *committer, w *pricebook.Watch) error {
	v, ok := w.Changed()
	if !ok || v == b.term.prices {
		return nil
	}
	if err := c.wait(); err != nil {
		return err
	}
	adopted, err := b.term.adopt(ctx, res, v, a.log)
	if adopted {
		b.apply = b.term.priced.tracking(Priced(b.term.catalog))
	}
	return err
}

// newBatcher finishes a rebuild's switch that was interrupted, then
// returns the batcher of term t, at its checkpoint.
func (a *Aggregator) newBatcher(ctx context.Context, res *resources, t *term) (*batcher, error) {
	if t.cp.Switch != nil {
		if err := completeSwitch(ctx, a.cfg.JS, res, t, a.log, nil); err != nil {
			return nil, err
		}
	}
	a.applied.Store(t.cp.Seq)
	b := &batcher{
		agg:         a,
		res:         res,
		term:        t,
		prepared:    t.cp.Seq,
		rejectFloor: t.rejFloor,
		cache:       newCache(a.cfg.CacheSize),
	}
	var err error
	if err := t.loadCatalog(ctx, res); err != nil {
		return nil, err
	}
	if b.apply = a.cfg.Apply; b.apply == nil {
		b.apply = Priced(t.catalog)
	}
	b.apply = t.priced.tracking(b.apply)
	if b.absentReq, err = emptyFilter(ctx, res.requests); err != nil {
		return nil, err
	}
	if b.absentSes, err = emptyFilter(ctx, res.sessions); err != nil {
		return nil, err
	}
	if res.rollups != nil {
		if b.absentRol, err = emptyFilter(ctx, res.rollups); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// consume reads the stream after sequence cp with an ordered consumer
// into a read-ahead: up to a batch of decoded events (and readAheadBytes)
// waits there while a batch commits; the client library holds at most
// readAhead more, and two pull requests' bytes (see input.go).
func (a *Aggregator) consume(ctx context.Context, res *resources, cp uint64) (*intake, func(), error) {
	occ := jetstream.OrderedConsumerConfig{FilterSubjects: []string{names.AttemptsSubjects}}
	if cp > 0 {
		occ.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		occ.OptStartSeq = cp + 1
	}
	cons, err := res.stream.OrderedConsumer(ctx, occ)
	if err != nil {
		return nil, nil, fmt.Errorf("projection: creating consumer at %d: %w", cp+1, err)
	}
	ahead := newIntake(a.cfg.BatchSize, readAheadBytes)
	stop := make(chan struct{})
	// One map per label set the read-ahead and the batch hold, not one
	// per event: under the memory limit, a map per event made a labelled
	// stream's catch-up spend half its time collecting garbage.
	labelSets := events.NewLabelInterner(0)
	cc, err := cons.Consume(func(m jetstream.Msg) { ahead.put(fetch(m, labelSets), stop) },
		PullLimits(a.cfg.JS.Conn().MaxPayload(), min(a.cfg.BatchSize, readAhead)),
		// Heartbeats every AckWait/2: a consumer whose stream leader died
		// is recreated within AckWait.
		jetstream.PullExpiry(max(4*a.cfg.AckWait/2, time.Second)), jetstream.PullHeartbeat(a.cfg.AckWait/2))
	if err != nil {
		return nil, nil, fmt.Errorf("projection: consuming: %w", err)
	}
	return ahead, func() {
		close(stop)
		cc.Stop()
	}, nil
}

// committer commits one batch at a time on its own goroutine, so that the
// loop gathers and prepares the next one meanwhile.
type committer struct {
	b      *batcher
	ctx    context.Context // the caller's: its end is a graceful stop
	runCtx context.Context // also ends when the lease is lost
	done   chan error      // the in-flight batch's outcome; nil when none
}

// await returns the first message of the next batch, settling commits
// that end meanwhile. ok is false when the loop must end, with err.
func (c *committer) await(ahead *intake) (first fetched, ok bool, err error) {
	for {
		select {
		case <-c.runCtx.Done():
			return fetched{}, false, c.wait()
		case err := <-c.done: // nil channel when nothing is in flight
			if err := c.settle(err); err != nil {
				return fetched{}, false, err
			}
		case m := <-ahead.ch:
			return m, true, nil
		}
	}
}

// next sends the prepared job j (nil when its batch held nothing new)
// once the in-flight batch has committed.
func (c *committer) next(j *job, inHand time.Time) error {
	if j != nil && c.done != nil {
		if err := c.b.fault(FaultNextPrepared); err != nil {
			return err
		}
	}
	if err := c.wait(); err != nil {
		return err
	}
	if j == nil {
		return nil
	}
	j.inHand = inHand
	j.resolve()
	c.start(j)
	return nil
}

// start commits j on its own goroutine. A batch in hand is finished even
// when ctx ends (a graceful stop), but not when the lease is lost.
func (c *committer) start(j *job) {
	commitCtx, cancel := context.WithTimeout(context.WithoutCancel(c.runCtx), 30*time.Second)
	stopOnLease := context.AfterFunc(c.runCtx, func() {
		if c.ctx.Err() == nil {
			cancel()
		}
	})
	c.b.inflight, c.done = j, make(chan error, 1)
	go func(done chan<- error) {
		err := c.b.commit(commitCtx, j)
		stopOnLease()
		cancel()
		done <- err
	}(c.done)
}

// wait waits for the in-flight batch, if any, and settles it.
func (c *committer) wait() error {
	if c.done == nil {
		return nil
	}
	return c.settle(<-c.done)
}

// settle records the outcome of the in-flight batch.
func (c *committer) settle(err error) error {
	j := c.b.inflight
	c.b.inflight, c.done = nil, nil
	if err != nil {
		return err
	}
	c.b.finish(j)
	return nil
}

// drain waits for a commit still in flight when the loop ends.
func (c *committer) drain() {
	if c.done != nil {
		<-c.done
	}
}

// absentKeys is how many keys the absent filters are sized for (1.2 MiB
// each).
const absentKeys = 1_000_000

// emptyFilter returns an absentFilter when the bucket holds no message
// but the term's fence marker, else nil. The term's fence keeps every
// other writer out, so a key the term has not written stays absent.
func emptyFilter(ctx context.Context, b *bucket) (*absentFilter, error) {
	info, err := b.stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("projection: reading %s: %w", b.kv.Bucket(), err)
	}
	if info.State.Msgs > 1 {
		return nil, nil
	}
	return newAbsentFilter(absentKeys), nil
}

// headerOriginalSeq carries the original stream sequence of a rejection.
const headerOriginalSeq = "Ledger-Original-Sequence"

// WaitCaughtUp polls until the live checkpoint reaches the last sequence of
// LEDGER_ATTEMPTS, read at each poll, and returns both. It returns ctx's
// error (with the last values seen) when ctx ends first.
func WaitCaughtUp(ctx context.Context, js jetstream.JetStream, poll time.Duration) (applied, last uint64, err error) {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		// A read cut off by the deadline keeps the values of the last
		// one that succeeded: the caller says how far the ledger got.
		a, err := ReadCheckpoint(ctx, js)
		if err != nil && ctx.Err() == nil {
			return 0, 0, err
		}
		if err == nil {
			applied = a
			s, serr := js.Stream(ctx, names.AttemptsStream)
			if serr == nil {
				info, ierr := s.Info(ctx)
				if ierr == nil {
					last = info.State.LastSeq
					if applied >= last {
						return applied, last, nil
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return applied, last, ctx.Err()
		case <-t.C:
		}
	}
}
