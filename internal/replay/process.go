package replay

import (
	"context"
	"fmt"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/projection"
)

// process applies a batch whose lookup was started: it resolves the
// requests met for the first time, applies every message by the
// aggregator's rules in stream order (merging the rejections with
// LEDGER_REJECTED), compares each request whose last message it applied,
// and spills requests in progress past the memory bound.
func (v *verifier) process(ctx context.Context, b *batch) error {
	res := <-b.look
	b.look = nil
	if res.err != nil {
		return res.err
	}
	old := map[string]string{} // requests finished before: their owner
	if err := v.resolve(ctx, b, b.firsts, res, old); err != nil {
		return err
	}
	if late := v.unresolved(b, old); len(late) > 0 {
		// Requests that left memory while the lookup was under way.
		res := <-v.lookup(ctx, late, b.end)
		if res.err != nil {
			return res.err
		}
		if err := v.resolve(ctx, b, late, res, old); err != nil {
			return err
		}
	}
	touched, err := v.applyAll(b, old)
	if err != nil {
		return err
	}
	var finished []*openReq
	for _, r := range touched {
		if r.last <= b.end {
			finished = append(finished, r)
		}
	}
	if err := v.liveFor(ctx, finished, b.end); err != nil {
		return err
	}
	for _, r := range finished {
		if err := v.finish(ctx, r); err != nil {
			return err
		}
	}
	return v.open.spill(ctx, v.lim.open)
}

// unresolved lists the requests of b neither in memory, nor known as
// finished, nor looked up already.
func (v *verifier) unresolved(b *batch, old map[string]string) []first {
	asked := make(map[string]bool, len(b.firsts))
	for _, f := range b.firsts {
		asked[f.id] = true
	}
	return v.candidates(b, func(id string) bool {
		_, finished := old[id]
		return finished || asked[id] || v.open.has(id)
	})
}

// resolve decides, for each request met for the first time, whether it
// is in progress (spilled earlier: loaded back), finished earlier (its
// events now are session conflicts: old) or new. A finished request is no
// longer in memory, so the live ledger vouches for it: its live record
// was compared when it finished and names its session; the requests the
// live ledger cannot vouch for (absent, under another session,
// unreadable) are in the drift set. See the package comment.
func (v *verifier) resolve(ctx context.Context, b *batch, firsts []first, res lookupResult, old map[string]string) error {
	for _, f := range firsts {
		if data, ok := res.spilled[f.id]; ok {
			r, err := decodeOpen(data)
			if err != nil {
				return fmt.Errorf("replay: scratch record %s is not readable: %w", f.id, err)
			}
			r.spilled = true
			v.open.reqs[f.id] = r
			continue
		}
		if !f.valid {
			continue
		}
		owner := f.drift
		if owner == "" {
			owner = res.drift[f.id]
		}
		if owner != "" {
			old[f.id] = owner
			continue
		}
		live, found := res.live[f.id]
		if !f.fresh && found && !live.deleted && !v.liveSessionIs(live.data, f.id, f.session) {
			owner, err := v.ownerBefore(ctx, live.data, f)
			if err != nil {
				return err
			}
			if owner != "" {
				old[f.id] = owner
				continue
			}
		}
		last := b.end
		if l, ok := res.last[f.id]; ok {
			last = l
		}
		r := &openReq{rec: projection.NewRequest(f.id, f.session), last: last}
		if !f.fresh {
			r.setLive(live.data, found, found && !live.deleted)
		}
		v.open.reqs[f.id] = r
	}
	return nil
}

// ownerBefore returns the session the live record names for a request met
// under another session when the request had an accepted event under that
// session before f (it finished earlier: f is a session conflict), else
// "" (it is new, and its live record is wrong).
func (v *verifier) ownerBefore(ctx context.Context, live []byte, f first) (string, error) {
	owner, err := liveSession(live)
	if err != nil || events.ValidateID("session_id", owner) != nil {
		return "", nil // unreadable: it would be in the drift set had it finished
	}
	found := false
	err = nextBySubject(ctx, v.nc, names.AttemptsStream, events.Subject(owner, f.id), 1, f.seq-1, func(m rawMsg) bool {
		_, aerr := projection.Accept(m.subject, m.data)
		found = aerr == nil
		return !found
	})
	if err != nil || !found {
		return "", err
	}
	return owner, nil
}

// applyAll applies b's messages in stream order and returns the requests
// in progress they touched.
func (v *verifier) applyAll(b *batch, old map[string]string) ([]*openReq, error) {
	v.open.batches++
	var touched []*openReq
	touch := func(r *openReq) {
		if r.mark != v.open.batches {
			r.mark = v.open.batches
			touched = append(touched, r)
		}
	}
	for i := range b.msgs {
		m := &b.msgs[i]
		var rej *rejection
		switch {
		case m.ev == nil:
			rej = rejectionOf(m)
			if sid, id, ok := events.ParseSubject(m.subject); ok {
				if r := v.open.reqs[id]; r != nil && r.rec.SessionID == sid {
					touch(r) // the last message on its subject may be this one
				}
			}
		default:
			id := m.ev.RequestID
			if _, finished := old[id]; finished {
				rej = conflictOf(m)
				break
			}
			r := v.open.reqs[id]
			if r == nil {
				return nil, fmt.Errorf("%w: request %q at sequence %d is neither new nor known", projection.ErrInvariant, id, m.seq)
			}
			if !v.fold(r, m.seq, m.ev) {
				rej = conflictOf(m)
				break
			}
			touch(r)
		}
		if err := v.rej.at(m.seq, rej); err != nil {
			return nil, err
		}
	}
	return touched, nil
}

// rejectionOf is the record the aggregator makes of a refused message:
// its body cut as the aggregator cuts it (projection.RejectionBody).
func rejectionOf(m *scanned) *rejection {
	r := &rejection{seq: m.seq, reason: events.ReasonMalformedJSON, subject: m.subject}
	r.body, r.size = projection.RejectionBody(m.data)
	if re, ok := m.err.(*events.RejectError); ok {
		r.reason = re.Reason
	}
	return r
}

func conflictOf(m *scanned) *rejection {
	r := &rejection{seq: m.seq, reason: events.ReasonSessionConflict, subject: m.subject}
	r.body, r.size = projection.RejectionBody(m.data)
	return r
}

// fold folds an accepted event into a request in progress
// (projection.Fold), reporting false for a session conflict. Past the
// checkpoint it keeps the request as it stood at the checkpoint and the
// events after it, so that the request can be compared at any sequence up
// to the target.
func (v *verifier) fold(r *openReq, seq uint64, ev *events.Attempt) bool {
	if seq > v.p && r.base == nil {
		r.base = cloneRequest(r.rec)
	}
	ok, _ := projection.Fold(r.rec, ev, v.apply)
	if ok && seq > v.p {
		r.post = append(r.post, postEvent{seq: seq, ev: ev})
	}
	return ok
}

// stateAt returns the request as it stood at sequence s (p <= s <= target).
func (v *verifier) stateAt(r *openReq, s uint64) *projection.Request {
	if r.base == nil {
		return r.rec
	}
	st := cloneRequest(r.base)
	for _, pe := range r.post {
		if pe.seq > s {
			break
		}
		projection.Fold(st, pe.ev, v.apply)
	}
	return st
}

func cloneRequest(r *projection.Request) *projection.Request {
	c := *r
	c.Log = append([]projection.Entry(nil), r.Log...)
	return &c
}

// liveFor gives every finished request its live record: from the window,
// else by a direct get (one round trip for all of them).
func (v *verifier) liveFor(ctx context.Context, rs []*openReq, end uint64) error {
	if err := v.window.fill(ctx, end); err != nil {
		return err
	}
	var miss []string
	for _, r := range rs {
		if r.haveLive {
			continue
		}
		if w, ok := v.window.take(r.rec.RequestID); ok {
			r.setLive(w.value, true, !w.deleted)
			continue
		}
		miss = append(miss, liveRequestPrefix+r.rec.RequestID)
	}
	if len(miss) == 0 {
		return nil
	}
	got, err := v.liveRecords(ctx, miss)
	if err != nil {
		return err
	}
	for _, r := range rs {
		if !r.haveLive {
			m, found := got[r.rec.RequestID]
			r.setLive(append([]byte(nil), m.data...), found, found && !m.deleted)
		}
	}
	return nil
}

// addToCell adds a finished request to its rollup cells' totals, one
// cell per grain the ledger writes, as to its session's: at the
// checkpoint, and at the cell's own sequence when its live record is
// newer. A request's cells are fixed by its first accepted event, so they
// are the same at every point where it exists.
func (v *verifier) addToCell(ctx context.Context, r *openReq, atP *projection.Request) error {
	hour, ok := r.rec.RollupCell()
	if !ok {
		return nil
	}
	keys := v.cellKeys.Keys(hour) // most requests share their cells: hashed once
	for _, g := range v.grains {
		key := keys[g]
		var atS projection.Totals
		if s, late := v.rols.lateTarget(key); late {
			atS = v.stateAt(r, s).Contribution()
		}
		if err := v.rols.add(ctx, key, atP.Contribution(), atS); err != nil {
			return err
		}
	}
	return nil
}

// finish adds a finished request to its session's totals, compares it
// with its live record and forgets it.
func (v *verifier) finish(ctx context.Context, r *openReq) error {
	atP := r.rec
	if r.base != nil {
		atP = r.base
	}
	owner := r.rec.SessionID
	var atS projection.Totals
	if s, late := v.sess.lateTarget(owner); late {
		atS = v.stateAt(r, s).Contribution()
	}
	if err := v.sess.add(ctx, owner, atP.Contribution(), atS); err != nil {
		return err
	}
	if err := v.addToCell(ctx, r, atP); err != nil {
		return err
	}
	if err := v.compareFinished(ctx, r, atP); err != nil {
		return err
	}
	if r.found {
		v.liveFound++
	}
	v.finished.add(r.rec.RequestID)
	v.open.forget(r)
	return nil
}
