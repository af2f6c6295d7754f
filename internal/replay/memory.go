package replay

import (
	"sort"

	"github.com/agentledger/ledger/internal/projection"
)

// Memory is the projection of a prefix of the stream held in memory: the
// request records and session totals that the aggregator's rules give for
// the events applied so far, in stream order. It is not safe for
// concurrent use.
type Memory struct {
	apply    projection.ApplyFunc
	requests map[string]*projection.Request
	sessions map[string]*projection.Totals
	seq      uint64
}

// NewMemory returns an empty projection that folds events by apply
// (projection.Fold; nil: the current (*projection.Request).Apply).
func NewMemory(apply projection.ApplyFunc) *Memory {
	return &Memory{apply: apply, requests: map[string]*projection.Request{}, sessions: map[string]*projection.Totals{}}
}

// Apply folds the stored message at stream sequence seq into the
// projection by the aggregator's rules (projection.Accept, session
// ownership by the first accepted event, the merge) and reports whether it
// was accepted. An event the aggregator would reject changes nothing.
// Messages must be applied in stream order.
func (m *Memory) Apply(seq uint64, subject string, data []byte) bool {
	m.seq = seq
	ev, err := projection.Accept(subject, data)
	if err != nil {
		return false
	}
	r := m.requests[ev.RequestID]
	if r == nil {
		r = projection.NewRequest(ev.RequestID, ev.SessionID)
		m.requests[ev.RequestID] = r
	}
	before := r.Contribution()
	ok, changed := projection.Fold(r, ev, m.apply)
	if !ok {
		return false
	}
	if changed {
		s := m.sessions[r.SessionID]
		if s == nil {
			s = &projection.Totals{}
			m.sessions[r.SessionID] = s
		}
		*s = s.Add(r.Contribution().Sub(before))
	}
	return true
}

// Seq is the stream sequence of the last message applied (0: none).
func (m *Memory) Seq() uint64 { return m.seq }

// Request returns the contract fields of a request record, and whether the
// request has one.
func (m *Memory) Request(id string) (projection.RequestView, bool) {
	r := m.requests[id]
	if r == nil || !r.Exists() {
		return projection.RequestView{}, false
	}
	return r.View(), true
}

// Session returns a session's totals, and whether the session has a record.
func (m *Memory) Session(id string) (projection.Totals, bool) {
	s := m.sessions[id]
	if s == nil {
		return projection.Totals{}, false
	}
	return *s, true
}

// RequestIDs returns the IDs of every request with a record, unsorted.
func (m *Memory) RequestIDs() []string {
	ids := make([]string, 0, len(m.requests))
	for id, r := range m.requests {
		if r.Exists() {
			ids = append(ids, id)
		}
	}
	return ids
}

// SessionIDs returns the IDs of every session with a record, unsorted.
func (m *Memory) SessionIDs() []string {
	ids := make([]string, 0, len(m.sessions))
	for id := range m.sessions {
		ids = append(ids, id)
	}
	return ids
}

// Sessions returns every session's view sorted by session ID, and their
// sum.
func (m *Memory) Sessions() ([]projection.SessionView, projection.Totals) {
	out := make([]projection.SessionView, 0, len(m.sessions))
	var total projection.Totals
	for id, t := range m.sessions {
		out = append(out, projection.SessionView{SessionID: id, Totals: *t})
		total = total.Add(*t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].SessionID < out[j].SessionID })
	return out, total
}
