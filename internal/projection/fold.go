package projection

import "github.com/agentledger/ledger/internal/events"

// ApplyFunc merges an accepted event into its request's record and
// reports whether the record changed. (*Request).Apply is the projection's
// rule; tests substitute others (the classic bug, ledgertest).
type ApplyFunc func(r *Request, ev *events.Attempt) bool

// Fold folds ev, an event Accept accepted, into r, the record of ev's
// request (NewRequest(ev.RequestID, ev.SessionID) while it has none), by
// apply (nil: (*Request).Apply). It is the one fold of an event into the
// records: the aggregator, the in-memory replay and verify all call it,
// so that they cannot disagree on what an event does.
//
// It reports false, leaving r as it was, when ev names another session
// than the one r is recorded under (the aggregator rejects the event as
// session_conflict: the first accepted event of a request owns it);
// otherwise true, and whether r changed. The first event folded into a
// record gives it its labels and rollup cell (Request.Cell).
func Fold(r *Request, ev *events.Attempt, apply ApplyFunc) (ok, changed bool) {
	if r.Conflicts(ev) {
		return false, false
	}
	if !r.Exists() && r.Cell == nil {
		// The first accepted event in stream order gives the request its
		// labels and rollup cell for life, whatever apply does.
		r.Labels, r.Cell = cellOf(ev)
	}
	if apply == nil {
		apply = (*Request).Apply
	}
	return true, apply(r, ev)
}
