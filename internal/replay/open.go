package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/projection"
)

// openReq is a request in progress: met in the replay, and its last
// message up to the target not yet replayed.
type openReq struct {
	rec *projection.Request // at the replay's position
	// last is the sequence of the last message on the request's subject up
	// to the target: once it is replayed, the request is finished.
	last uint64
	// live is its live record, when inLive; found: the live bucket has the
	// key (a value or a delete marker). haveLive: read already.
	live                    []byte
	inLive, found, haveLive bool
	// base is the request at the checkpoint, and post its events after it,
	// once there are any.
	base    *projection.Request
	post    []postEvent
	spilled bool   // a copy is in the scratch bucket
	mark    uint64 // the batch that last touched it
}

type postEvent struct {
	seq uint64
	ev  *events.Attempt
}

// openSet holds the requests in progress: up to a bound in memory, the
// rest in a scratch bucket until their next message.
type openSet struct {
	reqs    map[string]*openReq
	batches uint64
	scratch *scratch
	store   *scratchKV
	spilled *bloom
	forgot  []kvPut // finished spilled requests, to delete from the bucket
}

func newOpenSet(v *verifier) *openSet {
	return &openSet{reqs: map[string]*openReq{}, scratch: v.scratch}
}

func (r *openReq) setLive(data []byte, found, inLive bool) {
	r.found, r.inLive, r.haveLive = found, inLive, true
	if inLive {
		r.live = data
	}
}

func (s *openSet) has(id string) bool { _, ok := s.reqs[id]; return ok }

func (s *openSet) forget(r *openReq) {
	delete(s.reqs, r.rec.RequestID)
	if r.spilled {
		s.forgot = append(s.forgot, kvPut{key: r.rec.RequestID})
	}
}

// spill moves the requests whose last message is furthest away to the
// scratch bucket until at most bound/2 remain, once more than bound are in
// memory; it also deletes the finished ones' copies.
func (s *openSet) spill(ctx context.Context, bound int) error {
	puts := s.forgot
	s.forgot = nil
	if len(s.reqs) > bound {
		rs := make([]*openReq, 0, len(s.reqs))
		for _, r := range s.reqs {
			rs = append(rs, r)
		}
		slices.SortFunc(rs, func(a, b *openReq) int { return cmpUint(b.last, a.last) })
		for _, r := range rs[:len(rs)-bound/2] {
			data, err := encodeOpen(r)
			if err != nil {
				return err
			}
			puts = append(puts, kvPut{key: r.rec.RequestID, value: data})
			delete(s.reqs, r.rec.RequestID)
		}
	}
	if len(puts) == 0 {
		return nil
	}
	if s.store == nil {
		b, err := s.scratch.bucket(ctx, "requests")
		if err != nil {
			return err
		}
		s.store, s.spilled = b, newBloom()
	}
	for _, p := range puts {
		if p.value != nil {
			s.spilled.add(p.key)
		}
	}
	return s.store.putMany(ctx, puts)
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// checkEmpty fails when a request is still in progress after the replay:
// every one is finished by its last message, which the replay reaches.
func (s *openSet) checkEmpty() error {
	if len(s.reqs) > 0 {
		return fmt.Errorf("%w: %d requests left unfinished by the replay", projection.ErrInvariant, len(s.reqs))
	}
	return nil
}

// spilledReq is an openReq in the scratch bucket.
type spilledReq struct {
	Rec      *projection.Request `json:"rec"`
	Last     uint64              `json:"last"`
	Live     []byte              `json:"live,omitempty"`
	InLive   bool                `json:"in_live,omitempty"`
	Found    bool                `json:"found,omitempty"`
	HaveLive bool                `json:"have_live,omitempty"`
	Base     *projection.Request `json:"base,omitempty"`
	Post     []spilledEvent      `json:"post,omitempty"`
}

type spilledEvent struct {
	Seq   uint64          `json:"seq"`
	Event json.RawMessage `json:"event"`
}

func encodeOpen(r *openReq) ([]byte, error) {
	s := spilledReq{Rec: r.rec, Last: r.last, Live: r.live, InLive: r.inLive, Found: r.found, HaveLive: r.haveLive, Base: r.base}
	for _, pe := range r.post {
		data, err := events.Marshal(pe.ev)
		if err != nil {
			return nil, fmt.Errorf("replay: spilling request %s: %w", r.rec.RequestID, err)
		}
		s.Post = append(s.Post, spilledEvent{Seq: pe.seq, Event: data})
	}
	return json.Marshal(s)
}

func decodeOpen(data []byte) (*openReq, error) {
	var s spilledReq
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, err
	}
	if s.Rec == nil {
		return nil, fmt.Errorf("no record")
	}
	r := &openReq{rec: s.Rec, last: s.Last, live: s.Live, inLive: s.InLive, found: s.Found, haveLive: s.HaveLive, base: s.Base}
	for _, se := range s.Post {
		ev, err := events.Decode(se.Event)
		if err != nil {
			return nil, err
		}
		r.post = append(r.post, postEvent{seq: se.Seq, ev: ev})
	}
	return r, nil
}

// driftSet holds the requests whose live record, when compared, could not
// vouch for the session that owns them (absent, under another session,
// unreadable), with that session: in memory up to a bound, the rest in a
// scratch bucket. It is empty for a ledger without such drift.
type driftSet struct {
	max     int
	mem     map[string]string
	scratch *scratch
	store   *scratchKV
	spilled *bloom
}

func newDriftSet(max int, s *scratch) *driftSet {
	return &driftSet{max: max, mem: map[string]string{}, scratch: s}
}

func (d *driftSet) memOwner(id string) (string, bool) {
	o, ok := d.mem[id]
	return o, ok
}

func (d *driftSet) add(ctx context.Context, id, owner string) error {
	d.mem[id] = owner
	if len(d.mem) <= d.max {
		return nil
	}
	if d.store == nil {
		b, err := d.scratch.bucket(ctx, "drift")
		if err != nil {
			return err
		}
		d.store, d.spilled = b, newBloom()
	}
	puts := make([]kvPut, 0, len(d.mem))
	for k, o := range d.mem {
		puts = append(puts, kvPut{key: k, value: []byte(o)})
		d.spilled.add(k)
	}
	clear(d.mem)
	return d.store.putMany(ctx, puts)
}

// lookup reads ids from store (the drift set's bucket when the lookup was
// started); it may run on another goroutine than add.
func (d *driftSet) lookup(ctx context.Context, store *scratchKV, ids []string) (map[string]string, error) {
	if store == nil {
		return nil, nil
	}
	got, err := store.getMany(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(got))
	for k, v := range got {
		out[k] = string(v)
	}
	return out, nil
}

// owner returns the session of a request in the drift set, "" when it is
// not there.
func (d *driftSet) owner(ctx context.Context, id string) (string, error) {
	if o, ok := d.mem[id]; ok {
		return o, nil
	}
	if !d.spilled.mayHave(id) {
		return "", nil
	}
	got, err := d.lookup(ctx, d.store, []string{id})
	return got[id], err
}
