package report

import (
	"cmp"
	"slices"
	"time"

	"github.com/agentledger/ledger/internal/pricing"
	"github.com/agentledger/ledger/internal/projection"
)

// Result is the answer to a Query: one row per group of the dimensions,
// in the query's order, at most Top of them.
type Result struct {
	Query  Query
	Source Source
	// Grain is the grain of the rollups that answered (Query.Grain), and
	// Cells the number of its records read; both only for FromRollups.
	Grain projection.Grain
	Cells int
	// Coarser is the grain that would have answered had the ledger's
	// grains all been whole (LedgerRollupGrains), when it is not Grain:
	// the ledger was projected before them, and a rebuild would let the
	// query read fewer records.
	Coarser projection.Grain
	Rows    []Row
	// Groups counts the groups before --top cut them.
	Groups int
	// Total sums every group in the range, those --top cut included.
	Total Measures
	// Applied is the stream sequence the projection has applied up to;
	// StreamLast is the last sequence in LEDGER_ATTEMPTS.
	Applied, StreamLast uint64
}

// Row is one group: the value of each dimension (in the order of
// Query.By; "" for a cell without the label key of a label:KEY
// dimension) and its measures.
type Row struct {
	Values []string
	Measures
}

// Measures are a group's columns, derived from the sums of its cells.
// Tokens are input plus output (the cache reads and writes are part of
// the input, reasoning part of the output). Overhead is billed minus
// usage: what the retries cost, in tokens and in money. Money is in
// nano-US-dollars, each attempt at its own price; the billed tokens of
// attempts without a price are not in it but in UnpricedBilledTokens.
// When Saturated, some sum stopped at 2^63-1 (projection.Ceiling) and the
// derived columns (Retries, the overheads, the token sums) are unknown.
type Measures struct {
	Requests, Attempts, Retries               int64
	UsageTokens, BilledTokens, OverheadTokens int64
	UsageCost, BilledCost, OverheadCost       pricing.Money
	UnpricedBilledTokens                      int64
	LabelConflicts                            int64
	Saturated                                 bool
}

// measure derives the columns of t.
func measure(t projection.Totals) Measures {
	return Measures{
		Requests: t.Requests, Attempts: t.Attempts, Retries: t.Attempts - t.Requests,
		UsageTokens:    t.Usage.InputTokens + t.Usage.OutputTokens,
		BilledTokens:   t.Billed.InputTokens + t.Billed.OutputTokens,
		OverheadTokens: (t.Billed.InputTokens + t.Billed.OutputTokens) - (t.Usage.InputTokens + t.Usage.OutputTokens),
		UsageCost:      t.UsageCost, BilledCost: t.BilledCost, OverheadCost: t.BilledCost - t.UsageCost,
		UnpricedBilledTokens: t.UnpricedBilledTokens,
		LabelConflicts:       t.LabelConflicts,
		Saturated:            t.Saturated || sumOverflows(t.Usage.InputTokens, t.Usage.OutputTokens) || sumOverflows(t.Billed.InputTokens, t.Billed.OutputTokens),
	}
}

// sumOverflows reports whether a + b (both not negative) passes
// projection.Ceiling.
func sumOverflows(a, b int64) bool { return a > projection.Ceiling-b }

// gkey is a group's key: the string value of each dimension, and the
// hour or day (Unix seconds) of a time dimension.
type gkey struct {
	v [MaxDimensions]string
	t int64
}

// grouper sums totals into the groups of a query.
type grouper struct {
	q      Query
	groups map[gkey]*projection.Totals
}

func newGrouper(q Query) *grouper {
	return &grouper{q: q, groups: map[gkey]*projection.Totals{}}
}

// add counts t in the group of its cell, session and request, when the
// cell's hour is in the range (c nil: a session, outside time).
func (g *grouper) add(c *projection.Cell, session, request string, t projection.Totals) {
	if c != nil && !g.q.in(c.Hour) {
		return
	}
	var k gkey
	for i, d := range g.q.By {
		switch d.Kind {
		case ByModel:
			k.v[i] = c.Model
		case ByProvider:
			k.v[i] = c.Provider
		case ByLabel:
			k.v[i] = c.Labels[d.Key]
		case ByHour:
			k.t = c.Hour.Unix()
		case ByDay:
			k.t = c.Hour.Truncate(24 * time.Hour).Unix()
		case BySession:
			k.v[i] = session
		case ByRequest:
			k.v[i] = request
		}
	}
	if sum, ok := g.groups[k]; ok {
		*sum = sum.Add(t)
		return
	}
	first := t // allocated per group, not per call
	g.groups[k] = &first
}

// result orders the groups and keeps the first Top.
func (g *grouper) result(src Source) *Result {
	type group struct {
		k gkey
		m Measures
	}
	all := make([]group, 0, len(g.groups))
	var total projection.Totals
	for k, t := range g.groups {
		all = append(all, group{k, measure(*t)})
		total = total.Add(*t)
	}
	byDims := func(a, b gkey) int {
		for i, d := range g.q.By {
			if d.timed() {
				if c := cmp.Compare(a.t, b.t); c != 0 {
					return c
				}
				continue
			}
			// "" (no such label) after every value.
			if c := cmp.Or(cmp.Compare(absent(a.v[i]), absent(b.v[i])), cmp.Compare(a.v[i], b.v[i])); c != 0 {
				return c
			}
		}
		return 0
	}
	slices.SortFunc(all, func(a, b group) int {
		if c := compareMeasures(g.q.Sort, b.m, a.m); c != 0 { // descending
			return c
		}
		return byDims(a.k, b.k)
	})
	r := &Result{Query: g.q, Source: src, Groups: len(all), Total: measure(total)}
	if g.q.Top > 0 && len(all) > g.q.Top {
		all = all[:g.q.Top]
	}
	r.Rows = make([]Row, len(all))
	for i, gr := range all {
		r.Rows[i] = Row{Values: g.values(gr.k), Measures: gr.m}
	}
	return r
}

// absent is 1 for the value of a missing label, else 0.
func absent(v string) int {
	if v == "" {
		return 1
	}
	return 0
}

// values spells the dimensions of k: an hour in RFC 3339, a day as a
// date, both UTC.
func (g *grouper) values(k gkey) []string {
	vs := make([]string, len(g.q.By))
	for i, d := range g.q.By {
		switch d.Kind {
		case ByHour:
			vs[i] = time.Unix(k.t, 0).UTC().Format(time.RFC3339)
		case ByDay:
			vs[i] = time.Unix(k.t, 0).UTC().Format(time.DateOnly)
		default:
			vs[i] = k.v[i]
		}
	}
	return vs
}

// compareMeasures compares a and b by the measure of s (0 for SortNone).
// Overhead compares the money first (the one measure comparable across
// models), then the tokens, which alone decide between rows without a
// price.
func compareMeasures(s Sort, a, b Measures) int {
	switch s {
	case SortOverhead:
		return cmp.Or(cmp.Compare(a.OverheadCost, b.OverheadCost), cmp.Compare(a.OverheadTokens, b.OverheadTokens))
	case SortBilled:
		return cmp.Or(cmp.Compare(a.BilledTokens, b.BilledTokens), cmp.Compare(a.BilledCost, b.BilledCost))
	case SortCost:
		return cmp.Or(cmp.Compare(a.BilledCost, b.BilledCost), cmp.Compare(a.BilledTokens, b.BilledTokens))
	case SortRequests:
		return cmp.Compare(a.Requests, b.Requests)
	}
	return 0
}

// GroupRollups answers q from rollup records: their cells in
// [q.Since, q.Until), grouped by q.By. q must be valid and read the
// rollups (Source FromRollups), and rs be cells of a grain that answers
// it (Query.Grain): a GrainDay cell's Hour is its day's first, which
// groups by day and filters by whole days exactly but not by hour, and a
// GrainModelHour cell has no labels. The rows are then the same whatever
// the grain. Result.Cells is len(rs) and Result.Grain their grain.
func GroupRollups(rs []projection.Rollup, q Query) *Result {
	g := newGrouper(q)
	for i := range rs {
		g.add(&rs[i].Cell, "", "", rs[i].Totals)
	}
	r := g.result(FromRollups)
	r.Cells = len(rs)
	if len(rs) > 0 {
		r.Grain = rs[0].Grain
	}
	r.Coarser = r.Grain
	return r
}

// GroupSessions answers q from session records (--by session: each
// session's whole life).
func GroupSessions(ss []projection.SessionView, q Query) *Result {
	g := newGrouper(q)
	for _, s := range ss {
		g.add(nil, s.SessionID, "", s.Totals)
	}
	return g.result(FromSessions)
}
