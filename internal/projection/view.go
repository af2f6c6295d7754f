package projection

import (
	"time"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/pricing"
)

// RequestView is a request record's wire contract v1 fields only.
type RequestView struct {
	RequestID      string       `json:"request_id"`
	SessionID      string       `json:"session_id"`
	Provider       string       `json:"provider"`
	Model          string       `json:"model"`
	Status         string       `json:"status"`
	Attempts       int          `json:"attempts"`
	WinningAttempt int          `json:"winning_attempt"`
	Usage          events.Usage `json:"usage"`
	Billed         events.Usage `json:"billed"`
	// EstimatedInputTokens sums the input estimated for the attempts
	// whose provider never reported it, apart from Usage and Billed.
	EstimatedInputTokens int64 `json:"estimated_input_tokens,omitempty"`
	// UsageCost is the winning attempt's money, BilledCost every
	// attempt's, each at its own price (Entry.Cost); the Unpriced fields
	// count the input and output tokens of the attempts without a price.
	UsageCost            pricing.Money `json:"usage_cost"`
	BilledCost           pricing.Money `json:"billed_cost"`
	UnpricedUsageTokens  int64         `json:"unpriced_usage_tokens"`
	UnpricedBilledTokens int64         `json:"unpriced_billed_tokens"`
	FirstStartedAt       time.Time     `json:"first_started_at"`
	LastFinishedAt       time.Time     `json:"last_finished_at"`
	// Labels are those of the request's first accepted event in stream
	// order (as its session_id); nil when it had none.
	Labels api.Labels `json:"labels,omitempty"`
	// LabelConflicts counts the accepted attempts (log entries) whose
	// event's labels differ from Labels: counted, never mixed in.
	LabelConflicts int64 `json:"label_conflicts,omitempty"`
	// Cell is where the request is counted in the rollups, with Labels:
	// the hour and the provider and model of its first accepted event in
	// stream order, fixed for its life. nil for a record written before
	// the rollups (rules < 6), which no rollup counts until a rebuild.
	Cell *RecordCell `json:"cell,omitempty"`
}

// RecordCell is a request record's rollup cell but its labels (the
// record's own).
type RecordCell struct {
	Hour     time.Time `json:"hour"`
	Provider string    `json:"provider"`
	Model    string    `json:"model"`
}

// View returns the contract fields of r.
func (r *Request) View() RequestView { return r.RequestView }

// SessionView is a session record's wire contract v1 fields only.
type SessionView struct {
	SessionID string `json:"session_id"`
	Totals
}

// View returns the contract fields of s.
func (s *Session) View() SessionView { return s.SessionView }
