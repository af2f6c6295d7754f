package replay

import (
	"context"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/names"
)

// first is a request met in a batch that was not in memory: at its first
// message of the batch.
type first struct {
	id, session string // from the message
	seq         uint64
	valid       bool // the message was accepted (else only a spilled record matters)
	// fresh: the request was never finished, so it is new (no lookup of
	// its live record or drift entry is needed).
	fresh bool
	// drift is the request's owner when the in-memory drift set holds it.
	drift string
	// askSpill and askDrift: the scratch buckets may hold it.
	askSpill, askDrift bool
}

// lookupResult is what the server says about a batch's firsts.
type lookupResult struct {
	live    map[string]rawMsg // the live record, by request ID
	last    map[string]uint64 // the last message on the request's subject after the batch, by request ID
	spilled map[string][]byte
	drift   map[string]string
	err     error
}

// firsts lists the requests of b not in memory and not in prev (whose
// requests will be by the time b is applied).
func (v *verifier) firsts(b *batch, prev *batch) []first {
	inPrev := v.scratchSet(&v.inPrev)
	if prev != nil {
		for i := range prev.msgs {
			if id, ok := requestOf(&prev.msgs[i]); ok {
				inPrev[id] = true
			}
		}
	}
	return v.candidates(b, func(id string) bool { return inPrev[id] || v.open.has(id) })
}

// scratchSet empties and returns a set kept for reuse across batches.
func (v *verifier) scratchSet(m *map[string]bool) map[string]bool {
	if *m == nil {
		*m = make(map[string]bool, v.lim.batch)
	}
	clear(*m)
	return *m
}

// candidates lists the requests of b that skip does not exclude, each at
// its first accepted message (or, with none, at its first message, when a
// spilled record may be waiting for it).
func (v *verifier) candidates(b *batch, skip func(id string) bool) []first {
	if v.at == nil {
		v.at = make(map[string]int, v.lim.batch)
	}
	at := v.at
	clear(at)
	var out []first
	for i := range b.msgs {
		m := &b.msgs[i]
		id, ok := requestOf(m)
		if !ok || skip(id) {
			continue
		}
		j, seen := at[id]
		if !seen {
			j = len(out)
			at[id] = j
			out = append(out, first{id: id, seq: m.seq, askSpill: v.open.spilled.mayHave(id)})
		}
		if f := &out[j]; m.ev != nil && !f.valid {
			f.valid, f.seq, f.session = true, m.seq, m.ev.SessionID
			f.fresh = !v.finished.mayHave(id)
			if !f.fresh {
				f.drift, _ = v.drift.memOwner(id)
				f.askDrift = f.drift == "" && v.drift.spilled.mayHave(id)
			}
		}
	}
	keep := out[:0]
	for _, f := range out {
		if f.valid || f.askSpill { // an invalid event matters only to a record in progress
			keep = append(keep, f)
		}
	}
	return keep
}

// requestOf returns the request a message is about, from the event or,
// for a rejected one, from its subject.
func requestOf(m *scanned) (string, bool) {
	if m.ev != nil {
		return m.ev.RequestID, true
	}
	_, id, ok := events.ParseSubject(m.subject)
	return id, ok
}

// prepare lists b's firsts and starts their lookup.
func (v *verifier) prepare(ctx context.Context, b *batch, prev *batch) {
	b.firsts = v.firsts(b, prev)
	b.look = v.lookup(ctx, b.firsts, b.end)
}

// lookup asks the server, on its own goroutine, for what resolving firsts
// needs: the last message on each request's subject up to the target if
// it comes after the batch ending at end, and, for a request that may
// have finished before, its live record, and when the scratch buckets may
// hold them, its spilled record and drift entry. The
// requests go out at once; the answer is one round trip.
func (v *verifier) lookup(ctx context.Context, firsts []first, end uint64) <-chan lookupResult {
	out := make(chan lookupResult, 1)
	var liveSubj, lastSubj, spillKeys, driftKeys []string
	for _, f := range firsts {
		if f.valid {
			lastSubj = append(lastSubj, events.Subject(f.session, f.id))
		}
		if f.valid && !f.fresh {
			liveSubj = append(liveSubj, liveRequestPrefix+f.id)
		}
		if f.askSpill {
			spillKeys = append(spillKeys, f.id)
		}
		if f.askDrift {
			driftKeys = append(driftKeys, f.id)
		}
	}
	spill, drift := v.open.store, v.drift.store // read here: the batch being applied may create them
	go func() {
		var r lookupResult
		liveDone := make(chan error, 1)
		go func() {
			var err error
			r.live, err = v.liveRecords(ctx, liveSubj)
			liveDone <- err
		}()
		r.last, r.err = v.lastAfter(ctx, lastSubj, end)
		if r.err == nil && len(spillKeys) > 0 {
			r.spilled, r.err = spill.getMany(ctx, spillKeys)
		}
		if r.err == nil && len(driftKeys) > 0 {
			r.drift, r.err = v.drift.lookup(ctx, drift, driftKeys)
		}
		if err := <-liveDone; r.err == nil {
			r.err = err
		}
		out <- r
	}()
	return out
}

// liveRequestPrefix is the subject prefix of ledger_requests' keys.
const liveRequestPrefix = "$KV." + names.RequestsBucket + "."

// liveRecords reads live request records by subject, keyed by request ID.
func (v *verifier) liveRecords(ctx context.Context, subjects []string) (map[string]rawMsg, error) {
	got, err := multiLast(ctx, v.nc, "KV_"+names.RequestsBucket, subjects, 0, 0)
	if err != nil {
		return nil, err
	}
	out := make(map[string]rawMsg, len(got))
	for subj, m := range got {
		out[subj[len(liveRequestPrefix):]] = m
	}
	return out, nil
}

// lastAfter returns, for the attempt subjects that have a message after
// end and up to the target, the sequence of the last one, by request ID.
// Asking only from end+1 spares the server loading the messages of
// requests the batch finishes.
func (v *verifier) lastAfter(ctx context.Context, subjects []string, end uint64) (map[string]uint64, error) {
	got, err := multiLast(ctx, v.nc, names.AttemptsStream, subjects, end+1, v.target)
	if err != nil {
		return nil, err
	}
	out := make(map[string]uint64, len(got))
	for subj, m := range got {
		if _, id, ok := events.ParseSubject(subj); ok {
			out[id] = m.seq
		}
	}
	return out, nil
}
