package projection

import "github.com/agentledger/ledger/internal/events"

// The per-event rules of the projection, in the order the contract gives
// them. The aggregator, a rebuild and a replay from the stream all go
// through these two functions, so they cannot disagree on what counts.

// Accept decodes a stored message and checks it against its subject. The
// error, when not nil, is a *events.RejectError (too_large, malformed_json,
// unknown_schema, invalid_field or subject_mismatch).
func Accept(subject string, data []byte) (*events.Attempt, error) {
	return accept(subject, data, nil)
}

// accept is Accept, the event's labels interned in labelSets (nil: not
// interned): shared with the other events of that set, never written.
func accept(subject string, data []byte, labelSets *events.LabelInterner) (*events.Attempt, error) {
	ev, err := events.DecodeInterned(data, labelSets)
	if err != nil {
		return nil, err
	}
	if err := events.CheckSubject(subject, ev); err != nil {
		return nil, err
	}
	return ev, nil
}

// Conflicts reports whether ev must be rejected as session_conflict: the
// request is already recorded under another session (the session of its
// first accepted event in stream order).
func (r *Request) Conflicts(ev *events.Attempt) bool {
	return r.Exists() && r.SessionID != ev.SessionID
}

// RulesVersion is the version of the projection rules this build applies:
// Accept, Conflicts, the merge (Request.Apply) and what a request
// contributes to its session. Raise it whenever a change to any of them
// makes the same events project to a different ledger. The lease, the
// checkpoint, a rebuild's switch and every record carry the version that
// wrote them; an aggregator whose rules are older than its ledger's
// refuses to write (see the package comment).
//
// 3: the usage subsets (reasoning_tokens, cache_creation_1h_input_tokens)
// are read, checked against their wholes and summed (issue 19).
//
// 4: an attempt's estimated_input_tokens is kept in its log entry and
// summed apart, in the request's and the session's
// estimated_input_tokens (issue 19, branch estimate).
//
// 5: covers both issue 19 branches that were built apart, each of which
// bumped the version on its own (estimate to 4, cost to 3): the estimate
// of version 4, and each attempt priced (Entry.Cost, the money fields of
// records and sessions; branch cost). A ledger written by either one
// alone is rebuilt, not mixed.
//
// 6: a request's labels, label conflicts and rollup cell (fixed by its
// first accepted event in stream order), the label conflicts summed in
// sessions, and the rollups per cell in ledger_rollups (issue 20). A
// record written before has no cell and counts in no rollup until a
// rebuild.
//
// 7: the rollups' coarser grains (GrainDay, GrainModelHour), written in the
// same batches as the hour cells, and the request records' held_day and
// held_model_hour. A ledger gets them only when projected from its first
// event (its checkpoint's all_grains); one projected before keeps only
// the hour cells until a rebuild. A build of version 6 would write hour
// cells without their day and model-hour cells, so it must not write a
// ledger of version 7.
const RulesVersion = 7
