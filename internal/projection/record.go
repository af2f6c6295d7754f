package projection

import (
	"math"
	"time"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/pricing"
)

// Request statuses.
const (
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusPending   = "pending"
)

// Totals is what one request contributes to its session, and what a
// session sums over its requests.
//
// The sums never wrap around. One request cannot come near the limit (at
// most 1,001 attempts of at most 10^12 tokens per field), but a session of
// many requests can: a sum that would pass Ceiling stops at Ceiling, stays
// there whatever is added or taken later, and sets Saturated, which stays
// set (see Add). Ceiling is then a lower bound of the true sum as long as
// the sum does not shrink, which takes events that replace earlier ones.
type Totals struct {
	Requests  int64        `json:"requests"`
	Succeeded int64        `json:"succeeded"`
	Failed    int64        `json:"failed"`
	Pending   int64        `json:"pending"`
	Attempts  int64        `json:"attempts"`
	Usage     events.Usage `json:"usage"`
	Billed    events.Usage `json:"billed"`
	// EstimatedInputTokens sums the input estimated for attempts whose
	// provider never reported it (events' estimated_input_tokens): kept
	// apart from Usage and Billed, never added to them.
	EstimatedInputTokens int64 `json:"estimated_input_tokens,omitempty"`
	// UsageCost and BilledCost are the money of Usage and Billed, each
	// attempt priced at its own price (Entry.Cost); the tokens of an
	// attempt without a price are not in them but in UnpricedUsageTokens
	// and UnpricedBilledTokens (input and output tokens), so that an
	// unpriced attempt is never counted as $0.
	UsageCost            pricing.Money `json:"usage_cost"`
	BilledCost           pricing.Money `json:"billed_cost"`
	UnpricedUsageTokens  int64         `json:"unpriced_usage_tokens"`
	UnpricedBilledTokens int64         `json:"unpriced_billed_tokens"`
	// LabelConflicts counts the accepted attempts whose labels differ
	// from their request's (Request.LabelConflicts): their usage counts,
	// their labels do not.
	LabelConflicts int64 `json:"label_conflicts,omitempty"`
	// Saturated reports that some sum reached Ceiling: the fields at
	// Ceiling are not exact (the true sum was larger when it got there);
	// the others are.
	Saturated bool `json:"saturated,omitempty"`
}

// Retries is how many attempts were retries: Attempts - Requests (each
// request's first attempt is not one).
func (t Totals) Retries() int64 {
	var a arith
	a.xSat = t.Saturated
	return a.add(t.Attempts, -t.Requests)
}

// Ceiling is where a sum in Totals stops: 2^63-1.
const Ceiling = math.MaxInt64

// Add returns t + u, field by field. A sum that would pass Ceiling (or
// fall below math.MinInt64) stops there and sets Saturated; a field at
// Ceiling in a saturated t or u stays at Ceiling whatever is added to it
// (its true value is unknown); Saturated on t or u carries over. Adding
// numbers that are not negative therefore gives the same result in any
// order and grouping: the aggregator, which adds the deltas of a whole
// batch to a session at once, and the in-memory replay, which adds them
// one event at a time, agree.
func (t Totals) Add(u Totals) Totals {
	a := arith{xSat: t.Saturated, ySat: u.Saturated}
	return Totals{
		Requests:             a.add(t.Requests, u.Requests),
		Succeeded:            a.add(t.Succeeded, u.Succeeded),
		Failed:               a.add(t.Failed, u.Failed),
		Pending:              a.add(t.Pending, u.Pending),
		Attempts:             a.add(t.Attempts, u.Attempts),
		Usage:                a.addUsage(t.Usage, u.Usage),
		Billed:               a.addUsage(t.Billed, u.Billed),
		EstimatedInputTokens: a.add(t.EstimatedInputTokens, u.EstimatedInputTokens),

		UsageCost:            pricing.Money(a.add(int64(t.UsageCost), int64(u.UsageCost))),
		BilledCost:           pricing.Money(a.add(int64(t.BilledCost), int64(u.BilledCost))),
		UnpricedUsageTokens:  a.add(t.UnpricedUsageTokens, u.UnpricedUsageTokens),
		UnpricedBilledTokens: a.add(t.UnpricedBilledTokens, u.UnpricedBilledTokens),
		LabelConflicts:       a.add(t.LabelConflicts, u.LabelConflicts),
		Saturated:            t.Saturated || u.Saturated || a.saturated,
	}
}

// Sub returns t - u: t + (-u), with the rules of Add.
func (t Totals) Sub(u Totals) Totals { return t.Add(u.neg()) }

// neg returns -t. The negation of math.MinInt64, which int64 lacks, is
// Ceiling and saturates.
func (t Totals) neg() Totals {
	var a arith
	return Totals{
		Requests: a.neg(t.Requests), Succeeded: a.neg(t.Succeeded), Failed: a.neg(t.Failed),
		Pending: a.neg(t.Pending), Attempts: a.neg(t.Attempts),
		Usage:                a.negUsage(t.Usage),
		Billed:               a.negUsage(t.Billed),
		EstimatedInputTokens: a.neg(t.EstimatedInputTokens),

		UsageCost: pricing.Money(a.neg(int64(t.UsageCost))), BilledCost: pricing.Money(a.neg(int64(t.BilledCost))),
		UnpricedUsageTokens: a.neg(t.UnpricedUsageTokens), UnpricedBilledTokens: a.neg(t.UnpricedBilledTokens),
		LabelConflicts: a.neg(t.LabelConflicts),
		Saturated:      t.Saturated || a.saturated,
	}
}

// arith is saturating int64 arithmetic on the fields of two Totals, whose
// Saturated flags are xSat and ySat; saturated records whether a result
// saturated.
type arith struct{ xSat, ySat, saturated bool }

func (a *arith) add(x, y int64) int64 {
	s := x + y
	switch {
	case y == 0:
		return x
	case x == Ceiling && a.xSat || y == Ceiling && a.ySat:
		return Ceiling // a saturated sum stays saturated
	case y > 0 && s < x:
		a.saturated = true
		return Ceiling
	case y < 0 && s > x:
		a.saturated = true
		return math.MinInt64
	}
	return s
}

func (a *arith) addUsage(x, y events.Usage) events.Usage {
	return events.Usage{
		InputTokens:                a.add(x.InputTokens, y.InputTokens),
		OutputTokens:               a.add(x.OutputTokens, y.OutputTokens),
		CacheReadInputTokens:       a.add(x.CacheReadInputTokens, y.CacheReadInputTokens),
		CacheCreationInputTokens:   a.add(x.CacheCreationInputTokens, y.CacheCreationInputTokens),
		CacheCreation1hInputTokens: a.add(x.CacheCreation1hInputTokens, y.CacheCreation1hInputTokens),
		ReasoningTokens:            a.add(x.ReasoningTokens, y.ReasoningTokens),
	}
}

func (a *arith) neg(x int64) int64 {
	if x == math.MinInt64 {
		a.saturated = true
		return Ceiling
	}
	return -x
}

func (a *arith) negUsage(u events.Usage) events.Usage {
	return events.Usage{InputTokens: a.neg(u.InputTokens), OutputTokens: a.neg(u.OutputTokens),
		CacheReadInputTokens: a.neg(u.CacheReadInputTokens), CacheCreationInputTokens: a.neg(u.CacheCreationInputTokens),
		CacheCreation1hInputTokens: a.neg(u.CacheCreation1hInputTokens), ReasoningTokens: a.neg(u.ReasoningTokens)}
}

// appendSaturated appends the stored form of t.Saturated to a record: a
// member only when it is set, so unsaturated records keep their layout.
func appendSaturated(b []byte, t Totals) []byte {
	if !t.Saturated {
		return b
	}
	return append(b, `,"saturated":true`...)
}

// Entry is the accepted event for one attempt number of a request: of all
// events with that request_id and attempt, the one with the smallest
// event_id.
type Entry struct {
	Attempt  int            `json:"attempt"`
	EventID  string         `json:"event_id"`
	Outcome  events.Outcome `json:"outcome"`
	Final    bool           `json:"final"`
	Provider string         `json:"provider"`
	Model    string         `json:"model"`
	Usage    events.Usage   `json:"usage"`
	// EstimatedInput is the event's estimated_input_tokens.
	EstimatedInput int64     `json:"estimated_input_tokens,omitempty"`
	StartedAt      time.Time `json:"started_at"`
	FinishedAt     time.Time `json:"finished_at"`
	// Cost is the attempt's money at its own price (its provider, model,
	// service tier, usage and started_at) in the ledger's catalog;
	// Unpriced reports that the catalog has no price for it (Cost is 0
	// and its tokens are counted as unpriced).
	Cost     pricing.Money `json:"cost"`
	Unpriced bool          `json:"unpriced,omitempty"`
	// LabelConflict reports that the event's labels differ from its
	// request's (those of the request's first accepted event).
	LabelConflict bool `json:"label_conflict,omitempty"`
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
	// HeldCell is what the request's rollup cell held for it before the
	// batch Seq (as Held for the session; the two differ only after a
	// crash between the sessions and the rollups of a batch).
	HeldCell Totals `json:"held_cell"`
	// heldGrains, when not nil, are what the request's GrainDay and
	// GrainModelHour cells held for it before the batch Seq, as HeldCell
	// for its GrainHour cell (each cell has its own Seq: a crash between
	// two rollup writes of a batch leaves them apart); nil when both are
	// HeldCell, as nearly always. Read with heldIn, set with setHelds;
	// never modified in place (a clone shares it).
	heldGrains *[2]Totals
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
