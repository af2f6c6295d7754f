package projection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/topology"
)

// switchKey, in the live state bucket, records a switch in progress: the
// scratch projection at Checkpoint is being copied over the live ledger.
// Whoever holds the lease next — the rebuild again, or the live aggregator
// — finishes the copy before doing anything else, so an interrupted switch
// is always completed from the intact scratch copy.
const switchKey = "switch"

type switchRecord struct {
	Checkpoint uint64 `json:"checkpoint"`
	Scratch    Names  `json:"scratch"`
}

// RebuildConfig configures Rebuild.
type RebuildConfig struct {
	JS       jetstream.JetStream
	Topology topology.Config
	// Apply is the merge of the code doing the rebuild; nil is the
	// current (*Request).Apply.
	Apply func(r *Request, ev *events.Attempt) bool
	// LeaseTTL must match the live aggregators'. Default 10s.
	LeaseTTL time.Duration
	// BatchSize of the scratch projection. Default: Config.BatchSize.
	BatchSize int
	Logger    *slog.Logger
	// Progress, when set, is called now and then with the events the
	// scratch projection has applied and the stream's last sequence.
	Progress func(phase string, applied, last uint64)
}

// Rebuild rebuilds the live ledger (ledger_requests, ledger_sessions and
// LEDGER_REJECTED) from the whole stream under the current code, while the
// live aggregator keeps running and publishers keep publishing:
//
//  1. It projects the stream into scratch buckets (ScratchNames) with the
//     same exactly-once machinery as the live aggregator, until it has
//     caught up with the stream.
//  2. It asks the live lease holder to step aside (yieldKey), takes the
//     lease, lets the scratch projection catch up once more, and records
//     the switch (switchKey).
//  3. It copies every scratch record over the live one (each write replaces
//     a whole record), deletes live records the new code does not have,
//     replaces the rejections, sets the live checkpoint to the scratch one
//     and releases the lease: the live aggregator resumes from there.
//
// An interruption before step 2 leaves the live ledger untouched; a new
// rebuild starts over. An interruption during step 3 leaves the switch
// record, and whoever holds the lease next completes the copy.
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
	js := cfg.JS
	live, err := openResources(ctx, js, cfg.Topology, LiveNames())
	if err != nil {
		return err
	}
	id := "rebuild-" + ulid.Make().String()
	l := &lease{kv: live.state, holder: id, ttl: cfg.LeaseTTL, now: time.Now}

	if _, err := live.state.Get(ctx, switchKey); err == nil {
		// A switch was interrupted: finish it first.
		cfg.Logger.Info("rebuild: completing an interrupted switch")
		return holdAndSwitch(ctx, js, live, l, cfg, nil)
	} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("projection: reading %s: %w", switchKey, err)
	}

	if err := deleteScratch(ctx, js, ScratchNames()); err != nil {
		return err
	}
	scratch, err := New(Config{JS: js, Topology: cfg.Topology, Names: ScratchNames(), Apply: cfg.Apply,
		BatchSize: cfg.BatchSize, InstanceID: id, LeaseTTL: cfg.LeaseTTL, Logger: cfg.Logger})
	if err != nil {
		return err
	}
	sctx, stopScratch := context.WithCancel(ctx)
	defer stopScratch()
	scratchDone := make(chan error, 1)
	go func() { scratchDone <- scratch.Run(sctx) }()
	if err := catchUp(ctx, live.stream, scratch, scratchDone, "project", cfg.Progress); err != nil {
		return err
	}
	return holdAndSwitch(ctx, js, live, l, cfg, func() (uint64, error) {
		// Under the lease the live ledger is still: catch up once more, then
		// stop the scratch projection at a committed checkpoint.
		if err := catchUp(ctx, live.stream, scratch, scratchDone, "final", cfg.Progress); err != nil {
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
		return fmt.Errorf("projection: reading %s: %w", events.AttemptsStream, err)
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

// holdAndSwitch asks the live holder to yield, takes the lease, records the
// switch (with the checkpoint finish returns; nil finish means a switch
// record exists already) and completes it.
func holdAndSwitch(ctx context.Context, js jetstream.JetStream, live *resources, l *lease, cfg RebuildConfig, finish func() (uint64, error)) error {
	yval, _ := json.Marshal(leaseValue{Holder: l.holder, TTL: l.ttl})
	if _, err := live.state.Put(ctx, yieldKey, yval); err != nil {
		return fmt.Errorf("projection: asking the live aggregator to yield: %w", err)
	}
	// Keep the request fresh until we are done; a rebuild that dies lets it
	// go stale, and the live aggregator carries on.
	yctx, stopYield := context.WithCancel(ctx)
	yieldDone := make(chan struct{})
	go func() {
		defer close(yieldDone)
		t := time.NewTicker(l.ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-yctx.Done():
				return
			case <-t.C:
				_, _ = live.state.Put(yctx, yieldKey, yval)
			}
		}
	}()
	defer func() {
		stopYield()
		<-yieldDone
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = live.state.Delete(dctx, yieldKey)
	}()
	cfg.Logger.Info("rebuild: waiting for the live aggregator to step aside")
	if err := l.acquire(ctx, l.ttl/10); err != nil {
		return err
	}
	// Hold the lease (renewing it) until the switch is done.
	kctx, stopKeep := context.WithCancelCause(ctx)
	keepDone := make(chan struct{})
	go func() {
		defer close(keepDone)
		if err := l.keep(kctx); err != nil {
			stopKeep(err)
		}
	}()
	release := func() {
		stopKeep(nil)
		<-keepDone
		l.release(context.WithoutCancel(ctx))
	}
	if finish != nil {
		cp, err := finish()
		if err != nil {
			release()
			return err
		}
		rec, _ := json.Marshal(switchRecord{Checkpoint: cp, Scratch: ScratchNames()})
		if _, err := live.state.Put(kctx, switchKey, rec); err != nil {
			release()
			return fmt.Errorf("projection: recording the switch: %w", err)
		}
	}
	if err := completeSwitch(kctx, js, live, cfg.Logger, cfg.Progress); err != nil {
		// The switch record stays: whoever holds the lease next finishes it.
		stopKeep(nil)
		<-keepDone
		return err
	}
	release()
	return deleteScratch(context.WithoutCancel(ctx), js, ScratchNames())
}

// completeSwitch copies the scratch projection named by the switch record
// over the live ledger, when there is a switch record. It is idempotent:
// every step writes absolute values. The caller holds the live lease.
func completeSwitch(ctx context.Context, js jetstream.JetStream, live *resources, log *slog.Logger, progress func(string, uint64, uint64)) error {
	e, err := live.state.Get(ctx, switchKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("projection: reading %s: %w", switchKey, err)
	}
	var rec switchRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return fmt.Errorf("%w: switch record %q is not readable: %v", ErrInvariant, e.Value(), err)
	}
	scratch, err := openResources(ctx, js, topology.Config{}, rec.Scratch)
	if err != nil {
		return err
	}
	log.Info("switch: copying the rebuilt ledger over the live one", "checkpoint", rec.Checkpoint)
	if err := copyBucket(ctx, scratch.requests, live.requests, progress); err != nil {
		return err
	}
	if err := copyBucket(ctx, scratch.sessions, live.sessions, progress); err != nil {
		return err
	}
	if err := copyRejections(ctx, js, scratch, live); err != nil {
		return err
	}
	cp, _ := json.Marshal(checkpoint{Seq: rec.Checkpoint})
	if _, err := live.state.Put(ctx, checkpointKey, cp); err != nil {
		return fmt.Errorf("projection: setting the checkpoint to %d: %w", rec.Checkpoint, err)
	}
	if err := live.state.Delete(ctx, switchKey, jetstream.LastRevision(e.Revision())); err != nil {
		return fmt.Errorf("projection: clearing the switch record: %w", err)
	}
	log.Info("switch: done", "checkpoint", rec.Checkpoint)
	return nil
}

// copyBucket makes dst hold exactly the keys and values of src: every src
// record replaces the dst one whole (compare-and-set on the revision just
// read), then dst keys that src lacks are deleted.
func copyBucket(ctx context.Context, src, dst *bucket, progress func(string, uint64, uint64)) error {
	w, err := src.kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("projection: reading %s: %w", src.kv.Bucket(), err)
	}
	defer func() { _ = w.Stop() }()
	have := make(map[string]struct{})
	var chunk []put
	var copied uint64
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		keys := make([]string, len(chunk))
		for i := range chunk {
			keys[i] = chunk[i].key
		}
		revs, err := dst.getMany(ctx, keys)
		if err != nil {
			return err
		}
		for i := range chunk {
			chunk[i].rev = revs[chunk[i].key].rev
		}
		if err := dst.putAll(ctx, chunk); err != nil {
			return err
		}
		copied += uint64(len(chunk))
		progress("switch "+dst.kv.Bucket(), copied, 0)
		chunk = chunk[:0]
		return nil
	}
	for {
		var entry jetstream.KeyValueEntry
		select {
		case <-ctx.Done():
			return ctx.Err()
		case entry = <-w.Updates():
		}
		if entry == nil {
			break
		}
		have[entry.Key()] = struct{}{}
		chunk = append(chunk, put{key: entry.Key(), value: entry.Value()})
		if len(chunk) == 5000 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	lister, err := dst.kv.ListKeys(ctx)
	if err != nil {
		return fmt.Errorf("projection: listing %s: %w", dst.kv.Bucket(), err)
	}
	var extra []string
	for k := range lister.Keys() {
		if _, ok := have[k]; !ok {
			extra = append(extra, k)
		}
	}
	for _, k := range extra {
		if err := dst.kv.Delete(ctx, k); err != nil {
			return fmt.Errorf("projection: deleting %s/%s: %w", dst.kv.Bucket(), k, err)
		}
	}
	return nil
}

// copyRejections replaces the live rejections with the scratch ones, in
// order, under the live subjects.
func copyRejections(ctx context.Context, js jetstream.JetStream, scratch, live *resources) error {
	if err := live.rejected.Purge(ctx); err != nil {
		return fmt.Errorf("projection: purging %s: %w", live.names.Rejected, err)
	}
	info, err := scratch.rejected.Info(ctx)
	if err != nil {
		return err
	}
	if info.State.Msgs == 0 {
		return nil
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := scratch.rejected.GetMsg(ctx, seq)
		if err != nil {
			return fmt.Errorf("projection: reading rejection %d: %w", seq, err)
		}
		out := nats.NewMsg(live.names.RejectedPrefix + strings.TrimPrefix(m.Subject, scratch.names.RejectedPrefix))
		out.Data = m.Data
		for _, h := range []string{events.HeaderRejectReason, events.HeaderRejectDetail, events.HeaderOriginalSubject, headerOriginalSeq} {
			out.Header.Set(h, m.Header.Get(h))
		}
		out.Header[events.HeaderOriginalSize] = m.Header.Values(events.HeaderOriginalSize) // only on a cut body
		if _, err := js.PublishMsg(ctx, out); err != nil {
			return fmt.Errorf("projection: recording rejection %s: %w", out.Subject, err)
		}
	}
	return nil
}

// deleteScratch removes a rebuild's scratch resources (never live ones).
func deleteScratch(ctx context.Context, js jetstream.JetStream, n Names) error {
	if n == LiveNames() {
		return fmt.Errorf("%w: refusing to delete the live ledger", ErrInvariant)
	}
	for _, b := range []string{n.Requests, n.Sessions, n.State} {
		if err := js.DeleteKeyValue(ctx, b); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
			return fmt.Errorf("projection: deleting scratch bucket %s: %w", b, err)
		}
	}
	if err := js.DeleteStream(ctx, n.Rejected); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("projection: deleting scratch stream %s: %w", n.Rejected, err)
	}
	return nil
}

// Switching reports whether a rebuild's switch of the live ledger is in
// progress (or was interrupted and not yet completed).
func Switching(ctx context.Context, js jetstream.JetStream) (bool, error) {
	state, err := js.KeyValue(ctx, StateBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("projection: opening %s: %w", StateBucket, err)
	}
	_, err = state.Get(ctx, switchKey)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return false, nil
	default:
		return false, fmt.Errorf("projection: reading %s: %w", switchKey, err)
	}
}
