package projection

import (
	"maps"
	"sort"
	"time"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/pricing"
)

// NewRequest returns the empty record of a request not seen before.
func NewRequest(requestID, sessionID string) *Request {
	return &Request{RequestView: RequestView{RequestID: requestID, SessionID: sessionID, Status: StatusPending, WinningAttempt: -1}}
}

// Apply merges one accepted event into the record without a catalog:
// every attempt is unpriced (its tokens are counted as unpriced, never as
// $0). The aggregator, rebuild and verify apply Priced(catalog).
func (r *Request) Apply(ev *events.Attempt) bool { return r.ApplyPriced(ev, nil) }

// Priced returns the projection's rule, (*Request).ApplyPriced, with the
// catalog cat (nil: every attempt is unpriced).
func Priced(cat *pricing.Catalog) ApplyFunc {
	return func(r *Request, ev *events.Attempt) bool { return r.ApplyPriced(ev, cat) }
}

// ApplyPriced merges one accepted event into the record, the attempt
// priced in cat at its own price (PriceAttempt), and reports whether the
// record changed. It is a join: applying an event twice, or a set of
// events in any order, gives the same record for one catalog. The caller
// has checked that the event belongs to this request and session.
func (r *Request) ApplyPriced(ev *events.Attempt, cat *pricing.Catalog) bool {
	if len(r.Log) == 0 && r.Cell == nil {
		r.Labels, r.Cell = cellOf(ev)
	}
	i := sort.Search(len(r.Log), func(i int) bool { return r.Log[i].Attempt >= ev.Attempt })
	if i < len(r.Log) && r.Log[i].Attempt == ev.Attempt {
		e := r.entryOf(ev, cat)
		if !entryLess(e, r.Log[i]) {
			return false
		}
		r.Log[i] = e
	} else {
		r.Log = append(r.Log, Entry{})
		copy(r.Log[i+1:], r.Log[i:])
		r.Log[i] = r.entryOf(ev, cat)
	}
	r.derive()
	return true
}

// PriceAttempt prices one attempt at its own price: its provider, model,
// service tier and usage, at its started_at (the event's own time, which
// every replay agrees on, never a process's clock; pricing.Attempt.At). ok is false when cat
// is nil or has no price for it.
func PriceAttempt(cat *pricing.Catalog, ev *events.Attempt) (cost pricing.Money, ok bool) {
	if cat == nil {
		return 0, false
	}
	c, ok := cat.Price(attemptOf(ev))
	return c.Total, ok
}

// cellOf returns the labels and cell that ev, a request's first accepted
// event in stream order, gives its request for life.
func cellOf(ev *events.Attempt) (api.Labels, *RecordCell) {
	var labels api.Labels
	if len(ev.Labels) > 0 {
		// Shared with the event, not copied: an event is immutable once
		// accepted, its labels may be shared with other events
		// (events.DecodeInterned), and a record's labels are never written.
		labels = ev.Labels
	}
	return labels, &RecordCell{Hour: ev.StartedAt.UTC().Truncate(time.Hour), Provider: ev.Provider, Model: ev.Model}
}

// entryOf is the log entry of ev in r: its LabelConflict is set when r
// has a cell (it was not written before the rollups) and ev's labels
// differ from r's.
func (r *Request) entryOf(ev *events.Attempt, cat *pricing.Catalog) Entry {
	cost, ok := PriceAttempt(cat, ev)
	return Entry{
		LabelConflict:  r.Cell != nil && !labelsEqual(ev.Labels, r.Labels),
		Cost:           cost,
		Unpriced:       !ok,
		Attempt:        ev.Attempt,
		EventID:        ev.EventID,
		Outcome:        ev.Outcome,
		Final:          ev.Final,
		Provider:       ev.Provider,
		Model:          ev.Model,
		Usage:          ev.Usage,
		EstimatedInput: ev.EstimatedInputTokens,
		StartedAt:      ev.StartedAt,
		FinishedAt:     ev.FinishedAt,
	}
}

// entryLess orders competing events for one attempt number: the smaller
// event_id wins. Two different bodies under one event_id break the
// contract (event_id is unique per attempt); they are ordered by their
// content so that the record still does not depend on arrival order.
func entryLess(a, b Entry) bool {
	if a.EventID != b.EventID {
		return a.EventID < b.EventID
	}
	if a.Outcome != b.Outcome {
		return a.Outcome < b.Outcome
	}
	if a.Final != b.Final {
		return !a.Final
	}
	if a.Provider != b.Provider {
		return a.Provider < b.Provider
	}
	if a.Model != b.Model {
		return a.Model < b.Model
	}
	for _, p := range [][2]int64{
		{a.Usage.InputTokens, b.Usage.InputTokens},
		{a.Usage.OutputTokens, b.Usage.OutputTokens},
		{a.Usage.CacheReadInputTokens, b.Usage.CacheReadInputTokens},
		{a.Usage.CacheCreationInputTokens, b.Usage.CacheCreationInputTokens},
		{a.Usage.CacheCreation1hInputTokens, b.Usage.CacheCreation1hInputTokens},
		{a.Usage.ReasoningTokens, b.Usage.ReasoningTokens},
		{a.EstimatedInput, b.EstimatedInput},
		{a.StartedAt.UnixNano(), b.StartedAt.UnixNano()},
		{a.FinishedAt.UnixNano(), b.FinishedAt.UnixNano()},
		{int64(a.Cost), int64(b.Cost)},
		{boolInt(a.Unpriced), boolInt(b.Unpriced)},
		{boolInt(a.LabelConflict), boolInt(b.LabelConflict)},
	} {
		if p[0] != p[1] {
			return p[0] < p[1]
		}
	}
	return false
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// tokens is what an unpriced attempt counts: its input and output tokens
// (cache and reasoning tokens are subsets of them).
func tokens(u events.Usage) int64 { return u.InputTokens + u.OutputTokens }

// derive recomputes every contract field from the log.
func (r *Request) derive() {
	r.Attempts = len(r.Log)
	r.WinningAttempt = -1
	r.Usage = events.Usage{}
	r.Billed = events.Usage{}
	r.EstimatedInputTokens = 0
	r.UsageCost, r.BilledCost, r.UnpricedUsageTokens, r.UnpricedBilledTokens = 0, 0, 0, 0
	r.LabelConflicts = 0
	anyFinal := false
	var from *Entry
	for i := range r.Log {
		e := &r.Log[i]
		if e.LabelConflict {
			r.LabelConflicts++
		}
		r.Billed = r.Billed.Add(e.Usage)
		r.EstimatedInputTokens += e.EstimatedInput // at most 1,001 attempts of 10^12: no overflow
		// Saturating: 1,001 attempts at the largest prices could pass
		// 2^63-1 nano-USD; the session's sums saturate the same way.
		var a arith
		if e.Unpriced {
			r.UnpricedBilledTokens = a.add(r.UnpricedBilledTokens, tokens(e.Usage))
		} else {
			r.BilledCost = pricing.Money(a.add(int64(r.BilledCost), int64(e.Cost)))
		}
		if e.Outcome == events.OutcomeSuccess {
			r.WinningAttempt = e.Attempt // the log is sorted: the last success is the highest
			r.Usage = e.Usage
			r.UsageCost, r.UnpricedUsageTokens = e.Cost, 0
			if e.Unpriced {
				r.UsageCost, r.UnpricedUsageTokens = 0, tokens(e.Usage)
			}
			from = e
		} else if e.Final {
			anyFinal = true
		}
		if i == 0 || e.StartedAt.Before(r.FirstStartedAt) {
			r.FirstStartedAt = e.StartedAt
		}
		if i == 0 || e.FinishedAt.After(r.LastFinishedAt) {
			r.LastFinishedAt = e.FinishedAt
		}
	}
	switch {
	case r.WinningAttempt >= 0:
		r.Status = StatusSucceeded
	case anyFinal:
		r.Status = StatusFailed
	default:
		r.Status = StatusPending
	}
	// Provider and model: the winning attempt's, else the latest attempt's.
	if from == nil && len(r.Log) > 0 {
		from = &r.Log[len(r.Log)-1]
	}
	if from != nil {
		r.Provider, r.Model = from.Provider, from.Model
	}
}

// Exists reports whether any event has been accepted for the request.
func (r *Request) Exists() bool { return len(r.Log) > 0 }

// Contribution is what the request adds to its session's totals.
func (r *Request) Contribution() Totals {
	if !r.Exists() {
		return Totals{}
	}
	t := Totals{Requests: 1, Attempts: int64(r.Attempts), Usage: r.Usage, Billed: r.Billed,
		EstimatedInputTokens: r.EstimatedInputTokens,
		UsageCost:            r.UsageCost, BilledCost: r.BilledCost,
		UnpricedUsageTokens: r.UnpricedUsageTokens, UnpricedBilledTokens: r.UnpricedBilledTokens,
		LabelConflicts: r.LabelConflicts}
	switch r.Status {
	case StatusSucceeded:
		t.Succeeded = 1
	case StatusFailed:
		t.Failed = 1
	default:
		t.Pending = 1
	}
	return t
}

// heldBy returns what session s currently holds for r (as stored): the
// record's contribution when s has absorbed the batch that wrote r, else
// what s held before that batch.
func heldBy(r *Request, s *Session) Totals {
	if r == nil {
		return Totals{}
	}
	if s != nil && s.Seq >= r.Seq {
		return r.Contribution()
	}
	return r.Held
}

// heldByCell returns what rollup c, r's cell of grain g, currently holds
// for r (as stored), as heldBy for its session: the record's contribution
// when c has absorbed the batch that wrote r, else what c held before
// that batch.
func heldByCell(r *Request, c *Rollup, g Grain) Totals {
	if r == nil {
		return Totals{}
	}
	if c != nil && c.Seq >= r.Seq {
		return r.Contribution()
	}
	return r.heldIn(g)
}

// heldIn is what r's cell of grain g held for it before the batch r.Seq.
func (r *Request) heldIn(g Grain) Totals {
	if g == GrainHour || r.heldGrains == nil {
		return r.HeldCell
	}
	return r.heldGrains[g-1]
}

// setHelds sets what r's cells of each grain held for it before the batch
// r.Seq: its hour cell (HeldCell), day cell and model-hour cell.
func (r *Request) setHelds(hour, day, modelHour Totals) {
	r.HeldCell = hour
	if day == hour && modelHour == hour {
		r.heldGrains = nil
		return
	}
	r.heldGrains = &[2]Totals{day, modelHour}
}

// labelsEqual reports whether a and b hold the same pairs (nil and empty
// alike).
func labelsEqual(a, b api.Labels) bool { return maps.Equal(a, b) }

// clone returns a deep copy of r, so a batch can work on a copy of a
// cached record and drop it on failure.
func (r *Request) clone() *Request {
	c := *r
	c.Log = append([]Entry(nil), r.Log...)
	return &c
}

// attemptOf is what the catalog prices of an event.
func attemptOf(ev *events.Attempt) pricing.Attempt {
	return pricing.Attempt{Provider: ev.Provider, Model: ev.Model, ServiceTier: ev.ServiceTier, At: ev.StartedAt, Usage: ev.Usage}
}
