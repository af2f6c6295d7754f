package projection

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/names"
)

// ErrSwitchIncomplete means a rebuild's switch is recorded but its
// scratch copy is missing or not what was recorded: the switch cannot be
// finished, and the live ledger may be partly switched. It wraps
// ErrInvariant, so the aggregator stops rather than copy an incomplete
// ledger; `aggregator rebuild` rebuilds from the stream.
var ErrSwitchIncomplete = fmt.Errorf("%w: the rebuild's switch cannot be finished", ErrInvariant)

// recordSwitch stops the scratch projection at a committed checkpoint
// (finish) and records the switch to it in the live checkpoint, under
// term t: with the counts of the scratch streams, so that whoever
// finishes the switch can tell the scratch copy is intact.
func (r *rebuild) recordSwitch(ctx context.Context, t *term, finish func() (uint64, error)) error {
	cp, err := finish()
	if err != nil {
		return err
	}
	// A rebuild that lost its claim may find its scratch set deleted by the
	// one that took it: it records no switch. (Were it to pass this check
	// and pause, its switch would still copy only from a scratch set that
	// checkScratch finds intact.)
	if own, err := r.holdsClaim(ctx); err != nil || !own {
		return cmp.Or(err, errClaimLost)
	}
	scratch, err := lookupResources(ctx, r.cfg.JS, r.scratch)
	if err != nil {
		return err
	}
	scp, _, err := readCheckpoint(ctx, scratch.state)
	if err != nil {
		return err
	}
	sw := &switchRecord{Checkpoint: cp, Scratch: r.scratch, Rules: r.cfg.Rules, Prices: scp.Prices, PricedThrough: scp.PricedThrough, AllGrains: scp.AllGrains}
	if sw.Requests, sw.Sessions, sw.Rejected, sw.Rollups, err = scratch.counts(ctx); err != nil {
		return err
	}
	if err := t.writeCheckpoint(ctx, r.live.stateW, checkpoint{Seq: t.cp.Seq, Switch: sw}); err != nil {
		return fmt.Errorf("projection: recording the switch: %w", err)
	}
	return t.hit(FaultSwitchRecorded)
}

// counts returns the messages in the streams of the requests, sessions
// and rollups buckets (rol is 0 without rollups) and of the rejections.
func (res *resources) counts(ctx context.Context) (reqs, sess, rej, rol uint64, err error) {
	type count struct {
		s jetstream.Stream
		n *uint64
	}
	all := []count{{res.requests.stream, &reqs}, {res.sessions.stream, &sess}, {res.rejected, &rej}}
	if res.rollups != nil {
		all = append(all, count{res.rollups.stream, &rol})
	}
	for _, c := range all {
		info, err := c.s.Info(ctx)
		if err != nil {
			return 0, 0, 0, 0, fmt.Errorf("projection: reading %s: %w", c.s.CachedInfo().Config.Name, err)
		}
		*c.n = info.State.Msgs
	}
	return reqs, sess, rej, rol, nil
}

// rebuildAdvice ends the message of ErrSwitchIncomplete.
const rebuildAdvice = "the live ledger may be partly switched: run `aggregator rebuild` to rebuild it from the stream"

// checkScratch returns ErrSwitchIncomplete unless the scratch copy named
// by sw is there and intact: its checkpoint is the recorded one and its
// streams hold the recorded numbers of messages.
func checkScratch(ctx context.Context, js jetstream.JetStream, sw *switchRecord) error {
	gone := func(err error) error {
		if errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrBucketNotFound) {
			return fmt.Errorf("%w: %v; %s", ErrSwitchIncomplete, err, rebuildAdvice)
		}
		return err // not an answer: the check is not done
	}
	scratch, err := lookupResources(ctx, js, sw.Scratch)
	if err != nil {
		return gone(err)
	}
	cp, _, err := readCheckpoint(ctx, scratch.state)
	if err != nil {
		return gone(err)
	}
	reqs, sess, rej, rol, err := scratch.counts(ctx)
	if err != nil {
		return gone(err)
	}
	if cp.Seq != sw.Checkpoint || reqs != sw.Requests || sess != sw.Sessions || rej != sw.Rejected || rol != sw.Rollups {
		return fmt.Errorf("%w: the scratch copy is at checkpoint %d with %d/%d/%d/%d messages in %s/%s/%s/%s, the switch recorded %d with %d/%d/%d/%d; %s",
			ErrSwitchIncomplete, cp.Seq, reqs, sess, rej, rol, sw.Scratch.Requests, sw.Scratch.Sessions, sw.Scratch.Rejected, sw.Scratch.Rollups,
			sw.Checkpoint, sw.Requests, sw.Sessions, sw.Rejected, sw.Rollups, rebuildAdvice)
	}
	return nil
}

// completeSwitch copies the scratch projection named by the switch in the
// term's checkpoint over the live ledger, under term t, and commits the
// live checkpoint at the scratch one. It is idempotent: every step writes
// absolute values. Every write is conditional on the term's fences, so
// a former holder that resumes mid-copy writes nothing. Nothing is
// deleted or purged from the live ledger but after checkScratch found the
// scratch copy intact once everything the deletion depends on was read
// from it; if it is not, the switch stops with ErrSwitchIncomplete.
// Afterwards the term's rejection floor is the switched ledger's.
func completeSwitch(ctx context.Context, js jetstream.JetStream, live *resources, t *term, log *slog.Logger, progress func(string, uint64, uint64)) error {
	sw := t.cp.Switch
	if sw == nil {
		return nil
	}
	if progress == nil {
		progress = func(string, uint64, uint64) {}
	}
	if err := checkScratch(ctx, js, sw); err != nil {
		return err
	}
	scratch, err := lookupResources(ctx, js, sw.Scratch)
	if err != nil {
		return err
	}
	check := func() error { return checkScratch(ctx, js, sw) }
	log.Info("switch: copying the rebuilt ledger over the live one", "checkpoint", sw.Checkpoint, "term", t.id)
	if err := copyBucket(ctx, t, scratch.requests, live.requests, &t.reqLast, check, progress); err != nil {
		return err
	}
	if err := copyBucket(ctx, t, scratch.sessions, live.sessions, &t.sesLast, check, progress); err != nil {
		return err
	}
	if scratch.rollups != nil && live.rollups != nil {
		if err := copyBucket(ctx, t, scratch.rollups, live.rollups, &t.rolLast, check, progress); err != nil {
			return err
		}
	}
	if err := copyRejections(ctx, js, t, scratch, live, check); err != nil {
		return err
	}
	if err := t.hit(FaultSwitchCheckpoint); err != nil {
		return err
	}
	if err := check(); err != nil {
		return err
	}
	if sw.Prices != "" && sw.Prices != t.prices {
		// The rebuilt records are priced with the rebuild's catalog: the
		// ledger records it, and this term prices with it from now on.
		log.Info("switch: the ledger is priced with the rebuild's catalog", "catalog", sw.Prices, "was", t.prices)
		t.prices, t.catalog = sw.Prices, nil
	}
	// The records are the rebuild's: so is the latest attempt they priced
	// (the live term applies the events after the checkpoint again).
	t.priced.set(sw.PricedThrough, sw.Checkpoint)
	t.allGrains = sw.AllGrains && live.rollups != nil
	if err := t.writeCheckpoint(ctx, live.stateW, checkpoint{Seq: sw.Checkpoint}); err != nil {
		return fmt.Errorf("projection: setting the checkpoint to %d: %w", sw.Checkpoint, err)
	}
	// The live rejections are the scratch ones now, some maybe past its
	// checkpoint (recorded by a batch that did not commit): the floor the
	// term read when it began is not theirs.
	if _, t.rejFloor, err = lastRejection(ctx, live.rejected, live.names.RejectedPrefix+">"); err != nil {
		return err
	}
	log.Info("switch: done", "checkpoint", sw.Checkpoint)
	return nil
}

// copyChunk is how many records the switch writes per round.
const copyChunk = 5000

// copyBucket makes dst hold exactly the keys and values of src: every src
// record replaces the dst one whole, then dst keys that src lacks are
// deleted, once check has found src intact after it was read in full (a
// src emptied while it was read would otherwise delete every dst key it
// lacks). Every write is compare-and-set on the revision just read and
// expects dst's stream to end at *last (the term's fence).
func copyBucket(ctx context.Context, t *term, src, dst *bucket, last *uint64, check func() error, progress func(string, uint64, uint64)) error {
	w, err := src.kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("projection: reading %s: %w", src.kv.Bucket(), err)
	}
	defer func() { _ = w.Stop() }()
	have := make(map[string]struct{})
	var chunk []put
	var copied uint64
	flush := func() error {
		if err := writeChunk(ctx, t, dst, chunk, last); err != nil {
			return err
		}
		copied += uint64(len(chunk))
		progress("switch "+dst.kv.Bucket(), copied, 0)
		chunk = chunk[:0]
		return t.hit(FaultSwitchCopy)
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
		if len(chunk) == copyChunk {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if err := check(); err != nil {
		return err
	}
	lister, err := dst.kv.ListKeys(ctx)
	if err != nil {
		return fmt.Errorf("projection: listing %s: %w", dst.kv.Bucket(), err)
	}
	var extra []put
	for k := range lister.Keys() {
		if _, ok := have[k]; !ok {
			extra = append(extra, put{key: k, del: true})
		}
	}
	for i := 0; i < len(extra); i += copyChunk {
		if err := writeChunk(ctx, t, dst, extra[i:min(i+copyChunk, len(extra))], last); err != nil {
			return err
		}
	}
	return nil
}

// writeChunk writes puts over whatever dst holds: compare-and-set on the
// revisions read just before, under the term's fence.
func writeChunk(ctx context.Context, t *term, dst *bucket, puts []put, last *uint64) error {
	if len(puts) == 0 {
		return nil
	}
	keys := make([]string, len(puts))
	for i := range puts {
		keys[i] = puts[i].key
	}
	revs, err := dst.getMany(ctx, keys)
	if err != nil {
		return err
	}
	for i := range puts {
		puts[i].rev = revs[puts[i].key].rev
	}
	if err := t.valid(); err != nil {
		return err
	}
	return dst.putAll(ctx, puts, last)
}

// copyRejections replaces the live rejections with the scratch ones, in
// order, under the live subjects. It purges only what the live stream
// held when the term began, and only once check has found the scratch
// copy intact; every record expects the stream to end where the term
// knows it ends.
func copyRejections(ctx context.Context, js jetstream.JetStream, t *term, scratch, live *resources, check func() error) error {
	if err := check(); err != nil {
		return err
	}
	if err := t.valid(); err != nil {
		return err
	}
	if t.rejLast > 0 {
		if err := live.rejected.Purge(ctx, jetstream.WithPurgeSequence(t.rejLast+1)); err != nil {
			return fmt.Errorf("projection: purging %s: %w", live.names.Rejected, err)
		}
	}
	if err := t.hit(FaultSwitchRejections); err != nil {
		return err
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
		if size := m.Header.Values(events.HeaderOriginalSize); len(size) > 0 { // only on a cut body
			out.Header[events.HeaderOriginalSize] = size
		}
		if err := t.valid(); err != nil {
			return err
		}
		ack, err := js.PublishMsg(ctx, out, jetstream.WithExpectLastSequence(t.rejLast))
		if err != nil {
			return fmt.Errorf("projection: recording rejection %s: %w", out.Subject, err)
		}
		t.rejLast = ack.Sequence
	}
	return nil
}

// lookupResources opens the resources named n without creating any: a
// missing one is an error.
func lookupResources(ctx context.Context, js jetstream.JetStream, n Names) (*resources, error) {
	res := &resources{names: n}
	var err error
	if res.stream, err = js.Stream(ctx, names.AttemptsStream); err != nil {
		return nil, fmt.Errorf("projection: opening %s: %w", names.AttemptsStream, err)
	}
	if res.rejected, err = js.Stream(ctx, n.Rejected); err != nil {
		return nil, fmt.Errorf("projection: opening %s: %w", n.Rejected, err)
	}
	open := func(name string) (jetstream.KeyValue, *bucket, error) {
		kv, err := js.KeyValue(ctx, name)
		if err != nil {
			return nil, nil, fmt.Errorf("projection: opening %s: %w", name, err)
		}
		b, err := newBucket(ctx, js, kv)
		return kv, b, err
	}
	if _, res.requests, err = open(n.Requests); err != nil {
		return nil, err
	}
	if _, res.sessions, err = open(n.Sessions); err != nil {
		return nil, err
	}
	if res.state, res.stateW, err = open(n.State); err != nil {
		return nil, err
	}
	if n.Rollups != "" {
		if _, res.rollups, err = open(n.Rollups); err != nil {
			return nil, err
		}
	}
	return res, nil
}
