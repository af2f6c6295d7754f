package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/projection"
)

// ErrTooBusy means the live aggregator rewrote more records while verify
// read them than verify keeps track of; run verify again.
var ErrTooBusy = errors.New("replay: the live ledger changed too much while verify read it")

// sessionTotals is what verify knows of one session (or one rollup
// cell): the live record it read at the start and the recomputed totals,
// summed over the session's requests as each is finished. Partial sums add up, so one spilled to a
// scratch bucket is merged, never reread.
type sessionTotals struct {
	Live    projection.Totals `json:"live"`
	LiveSeq uint64            `json:"live_seq,omitempty"`
	InLive  bool              `json:"in_live,omitempty"`
	// AtP is the recomputed totals at the live checkpoint; AtS at the
	// live record's own sequence, for a record written after it.
	AtP projection.Totals `json:"at_p"`
	AtS projection.Totals `json:"at_s"`
}

func (t *sessionTotals) merge(o *sessionTotals) {
	if o.InLive || o.LiveSeq > t.LiveSeq {
		t.Live, t.LiveSeq, t.InLive = o.Live, o.LiveSeq, o.InLive
	}
	t.AtP = t.AtP.Add(o.AtP)
	t.AtS = t.AtS.Add(o.AtS)
}

// sessionStore holds every session's sessionTotals: up to max in memory,
// the rest merged into a scratch bucket. The same store holds the rollup
// cells (kind KindRollup, keyed by their ledger_rollups key): a rollup is
// summed over its requests as a session is, and compared the same way.
type sessionStore struct {
	kind    string // KindSession or KindRollup
	bucket  string // the live bucket
	p       uint64 // the live checkpoint
	max     int
	mem     map[string]*sessionTotals
	late    map[string]uint64 // sessions whose live record is newer than p: its sequence
	maxLate int
	scratch *scratch
	spill   *scratchKV
	spilled *bloom
}

func newSessionStore(p uint64, lim limits, s *scratch) *sessionStore {
	return &sessionStore{kind: KindSession, bucket: names.SessionsBucket, p: p, max: lim.sessions, maxLate: lim.late,
		mem: map[string]*sessionTotals{}, late: map[string]uint64{}, scratch: s}
}

// newRollupStore is the store of the rollup cells.
func newRollupStore(p uint64, lim limits, s *scratch) *sessionStore {
	st := newSessionStore(p, lim, s)
	st.kind, st.bucket = KindRollup, names.RollupsBucket
	return st
}

// decode reads a live record's totals and watermark.
func (st *sessionStore) decode(value []byte) (projection.Totals, uint64, error) {
	if st.kind == KindRollup {
		var c projection.Rollup
		err := json.Unmarshal(value, &c)
		return c.Totals, c.Seq, err
	}
	var s projection.Session
	err := json.Unmarshal(value, &s)
	return s.Totals, s.Seq, err
}

// readLive reads every live session record once, just after the live
// checkpoint p was read: a record written at or before p is the session
// at p (no batch up to p writes after p is committed); one written after
// p is compared at its own sequence, and there are few, since verify
// reads them at once. It returns the highest of those sequences (p when
// there are none).
func (st *sessionStore) readLive(ctx context.Context, v *verifier) (uint64, error) {
	target := st.p
	var overflow []kvPut
	err := eachKV(ctx, v.js, "KV_"+st.bucket, "$KV."+st.bucket+".", func(e kvEntry) error {
		t := &sessionTotals{}
		if !e.deleted {
			live, seq, err := st.decode(e.value)
			if err != nil {
				return fmt.Errorf("replay: record %s/%s is not readable: %w", st.bucket, e.key, err)
			}
			t.Live, t.LiveSeq, t.InLive = live, seq, true
		}
		delete(st.late, e.key)
		if t.InLive && t.LiveSeq > st.p {
			st.late[e.key] = t.LiveSeq
			target = max(target, t.LiveSeq)
			if len(st.late) > st.maxLate {
				return fmt.Errorf("%w: the live aggregator rewrote more than %d %ss after checkpoint %d while verify read them; run verify again", ErrTooBusy, st.maxLate, st.kind, st.p)
			}
		}
		if old := st.mem[e.key]; old != nil || len(st.mem) < st.max {
			st.mem[e.key] = t
			return nil
		}
		data, _ := json.Marshal(t)
		overflow = append(overflow, kvPut{key: e.key, value: data})
		if len(overflow) == 1000 {
			err := st.put(ctx, overflow)
			overflow = overflow[:0]
			return err
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return target, st.put(ctx, overflow)
}

// put writes records to the scratch bucket as they are (during readLive,
// the bucket holds live records only, and a later one replaces an
// earlier).
func (st *sessionStore) put(ctx context.Context, puts []kvPut) error {
	if len(puts) == 0 {
		return nil
	}
	if err := st.ensureSpill(ctx); err != nil {
		return err
	}
	for _, p := range puts {
		st.spilled.add(p.key)
	}
	return st.spill.putMany(ctx, puts)
}

func (st *sessionStore) ensureSpill(ctx context.Context) error {
	if st.spill != nil {
		return nil
	}
	b, err := st.scratch.bucket(ctx, st.kind+"s")
	if err != nil {
		return err
	}
	st.spill, st.spilled = b, newBloom()
	return nil
}

// lateTarget returns the sequence a session is compared at when its live
// record is newer than the checkpoint.
func (st *sessionStore) lateTarget(id string) (uint64, bool) {
	s, ok := st.late[id]
	return s, ok
}

// add adds a finished request's contribution to its session: at the
// checkpoint, and at the session's own sequence when it is late.
func (st *sessionStore) add(ctx context.Context, id string, atP, atS projection.Totals) error {
	t := st.mem[id]
	if t == nil {
		if len(st.mem) >= st.max {
			if err := st.evict(ctx, len(st.mem)/2); err != nil {
				return err
			}
		}
		t = &sessionTotals{}
		st.mem[id] = t
	}
	t.AtP = t.AtP.Add(atP)
	t.AtS = t.AtS.Add(atS)
	return nil
}

// evict merges n sessions held in memory into the scratch bucket.
func (st *sessionStore) evict(ctx context.Context, n int) error {
	keys := make([]string, 0, n)
	for k := range st.mem {
		if len(keys) == n {
			break
		}
		keys = append(keys, k)
	}
	return st.merge(ctx, keys)
}

// merge adds the in-memory parts of keys to the scratch bucket's and
// drops them from memory.
func (st *sessionStore) merge(ctx context.Context, keys []string) error {
	if err := st.ensureSpill(ctx); err != nil {
		return err
	}
	for len(keys) > 0 {
		part := keys[:min(len(keys), 4*maxSubjects)]
		keys = keys[len(part):]
		var maybe []string
		for _, k := range part {
			if st.spilled.mayHave(k) {
				maybe = append(maybe, k)
			}
		}
		stored, err := st.spill.getMany(ctx, maybe)
		if err != nil {
			return err
		}
		puts := make([]kvPut, len(part))
		for i, k := range part {
			t := st.mem[k]
			if data, ok := stored[k]; ok {
				var o sessionTotals
				if err := json.Unmarshal(data, &o); err != nil {
					return fmt.Errorf("replay: scratch record %s is not readable: %w", k, err)
				}
				t.merge(&o)
			}
			data, _ := json.Marshal(t)
			puts[i] = kvPut{key: k, value: data}
			delete(st.mem, k)
		}
		if err := st.put(ctx, puts); err != nil {
			return err
		}
	}
	return nil
}

// compareAll compares every session, live and recomputed, once.
func (st *sessionStore) compareAll(ctx context.Context, c *diffs) error {
	var toMerge []string
	for k, t := range st.mem {
		if st.spilled.mayHave(k) {
			toMerge = append(toMerge, k)
			continue
		}
		st.compare(c, k, t)
	}
	if len(toMerge) > 0 {
		if err := st.merge(ctx, toMerge); err != nil {
			return err
		}
	}
	if st.spill == nil {
		return nil
	}
	return st.spill.each(ctx, func(k string, v []byte) error {
		var t sessionTotals
		if err := json.Unmarshal(v, &t); err != nil {
			return fmt.Errorf("replay: scratch record %s is not readable: %w", k, err)
		}
		st.compare(c, k, &t)
		return nil
	})
}

func (st *sessionStore) compare(c *diffs, id string, t *sessionTotals) {
	seq, re := st.p, t.AtP
	if s, ok := st.late[id]; ok {
		seq, re = s, t.AtS
	}
	inRe := re.Requests > 0
	if !t.InLive && !inRe {
		return
	}
	checked, differ := &c.d.SessionsChecked, &c.d.SessionsDiffer
	if st.kind == KindRollup {
		checked, differ = &c.d.RollupsChecked, &c.d.RollupsDiffer
	}
	*checked++
	if c.totals(st.kind, id, seq, t.InLive, inRe, t.Live, re) {
		*differ++
	}
}
