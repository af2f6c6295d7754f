package projection

import (
	"time"

	"github.com/agentledger/ledger/internal/events"
)

// Request statuses.
const (
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusPending   = "pending"
)

// Totals is what one request contributes to its session, and what a
// session sums over its requests.
type Totals struct {
	Requests  int64        `json:"requests"`
	Succeeded int64        `json:"succeeded"`
	Failed    int64        `json:"failed"`
	Pending   int64        `json:"pending"`
	Attempts  int64        `json:"attempts"`
	Usage     events.Usage `json:"usage"`
	Billed    events.Usage `json:"billed"`
}

// Add returns t + u.
func (t Totals) Add(u Totals) Totals {
	return Totals{
		Requests:  t.Requests + u.Requests,
		Succeeded: t.Succeeded + u.Succeeded,
		Failed:    t.Failed + u.Failed,
		Pending:   t.Pending + u.Pending,
		Attempts:  t.Attempts + u.Attempts,
		Usage:     t.Usage.Add(u.Usage),
		Billed:    t.Billed.Add(u.Billed),
	}
}

// Sub returns t - u.
func (t Totals) Sub(u Totals) Totals {
	return Totals{
		Requests:  t.Requests - u.Requests,
		Succeeded: t.Succeeded - u.Succeeded,
		Failed:    t.Failed - u.Failed,
		Pending:   t.Pending - u.Pending,
		Attempts:  t.Attempts - u.Attempts,
		Usage:     t.Usage.Sub(u.Usage),
		Billed:    t.Billed.Sub(u.Billed),
	}
}

// Entry is the accepted event for one attempt number of a request: of all
// events with that request_id and attempt, the one with the smallest
// event_id.
type Entry struct {
	Attempt    int            `json:"attempt"`
	EventID    string         `json:"event_id"`
	Outcome    events.Outcome `json:"outcome"`
	Final      bool           `json:"final"`
	Provider   string         `json:"provider"`
	Model      string         `json:"model"`
	Usage      events.Usage   `json:"usage"`
	StartedAt  time.Time      `json:"started_at"`
	FinishedAt time.Time      `json:"finished_at"`
}

// Request is the record of one logical call in bucket ledger_requests:
// the wire contract v1 fields (RequestView, flattened into the same JSON
// object) and the projection's own (extra fields are allowed by the
// contract).
type Request struct {
	RequestView

	// Log holds one entry per distinct attempt number, sorted by attempt.
	// Every field of RequestView but the IDs is derived from it.
	Log []Entry `json:"log"`
	// Seq is the stream sequence of the batch that last wrote this record.
	Seq uint64 `json:"seq"`
	// Held is what the session record held for this request before the
	// batch Seq; see the package comment.
	Held Totals `json:"held"`
	// Rules is the RulesVersion of the code that wrote the record; 0 for a
	// record written before the rules were versioned.
	Rules int `json:"rules"`
}

// Session is the record of one session in bucket ledger_sessions: the sums
// over its requests. Seq is the projection's own: the highest batch
// sequence that wrote it.
type Session struct {
	SessionView
	Seq uint64 `json:"seq"`
	// Rules is as Request.Rules.
	Rules int `json:"rules"`
}
