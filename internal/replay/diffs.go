package replay

import (
	"container/heap"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/pricing"
	"github.com/agentledger/ledger/internal/projection"
)

// diffs keeps the differences found so far: the counts and sums of all of
// them, and the first limit of them in report order (all when limit is
// 0), so that memory grows with what is printed, never with the ledger.
type diffs struct {
	d     *Drift
	limit int
	kept  diffHeap // the smallest kept so far, largest on top
	seq   uint64   // insertion order: the order of fields within a record
}

type keyedDiff struct {
	Diff
	rank int
	key  string
	seq  uint64
}

// kindRank orders kinds in a report: sessions, rollups, requests,
// rejections.
func kindRank(kind string) int {
	switch kind {
	case KindSession:
		return 0
	case KindRollup:
		return 1
	case KindRequest:
		return 2
	}
	return 3
}

func less(a, b *keyedDiff) bool {
	if a.rank != b.rank {
		return a.rank < b.rank
	}
	if a.key != b.key {
		return a.key < b.key
	}
	return a.seq < b.seq
}

type diffHeap []*keyedDiff

func (h diffHeap) Len() int           { return len(h) }
func (h diffHeap) Less(i, j int) bool { return less(h[j], h[i]) } // largest on top
func (h diffHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *diffHeap) Push(x any)        { *h = append(*h, x.(*keyedDiff)) }
func (h *diffHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (c *diffs) add(df Diff) {
	c.d.DiffCount++
	c.seq++
	k := &keyedDiff{Diff: df, rank: kindRank(df.Kind), key: df.ID, seq: c.seq}
	if df.Kind == KindRejection {
		k.key = fmt.Sprintf("%020s", df.ID) // numeric order of stream sequences
	}
	if c.limit > 0 && len(c.kept) == c.limit {
		if !less(k, c.kept[0]) {
			return
		}
		heap.Pop(&c.kept)
	}
	heap.Push(&c.kept, k)
}

// sorted returns the kept differences in report order.
func (c *diffs) sorted() []Diff {
	ks := []*keyedDiff(c.kept)
	sort.Slice(ks, func(i, j int) bool { return less(ks[i], ks[j]) })
	out := make([]Diff, len(ks))
	for i, k := range ks {
		out[i] = k.Diff
	}
	return out
}

// record compares the fields of one record and adds a Diff for each that
// differs; differ reports whether any did.
type record struct {
	c      *diffs
	kind   string
	id     string
	seq    uint64
	differ bool
}

func (r *record) add(field, live, recomputed string, delta *int64) {
	r.differ = true
	r.c.add(Diff{Kind: r.kind, ID: r.id, Field: field, Live: live, Recomputed: recomputed, Delta: delta, Seq: r.seq})
}

func (r *record) str(field, live, recomputed string) {
	if live != recomputed {
		r.add(field, live, recomputed, nil)
	}
}

func (r *record) num(field string, live, recomputed int64) {
	if live != recomputed {
		delta := live - recomputed
		r.add(field, strconv.FormatInt(live, 10), strconv.FormatInt(recomputed, 10), &delta)
	}
}

// cost compares a money field: Live and Recomputed in US dollars, Delta
// in nano-USD.
func (r *record) cost(field string, live, recomputed pricing.Money) {
	if live != recomputed {
		delta := int64(live - recomputed)
		r.add(field, live.String(), recomputed.String(), &delta)
	}
}

func (r *record) time(field string, live, recomputed time.Time) {
	if !live.Equal(recomputed) {
		r.add(field, live.UTC().Format(time.RFC3339Nano), recomputed.UTC().Format(time.RFC3339Nano), nil)
	}
}

func (r *record) usage(prefix string, live, recomputed events.Usage) {
	r.num(prefix+".input_tokens", live.InputTokens, recomputed.InputTokens)
	r.num(prefix+".output_tokens", live.OutputTokens, recomputed.OutputTokens)
	r.num(prefix+".cache_read_input_tokens", live.CacheReadInputTokens, recomputed.CacheReadInputTokens)
	r.num(prefix+".cache_creation_input_tokens", live.CacheCreationInputTokens, recomputed.CacheCreationInputTokens)
	r.num(prefix+".cache_creation_1h_input_tokens", live.CacheCreation1hInputTokens, recomputed.CacheCreation1hInputTokens)
	r.num(prefix+".reasoning_tokens", live.ReasoningTokens, recomputed.ReasoningTokens)
}

// cellString writes a record's cell for a Diff.
func cellString(c *projection.RecordCell) string {
	if c == nil {
		return "none"
	}
	return fmt.Sprintf("%s %q %q", c.Hour.UTC().Format(time.RFC3339), c.Provider, c.Model)
}

func presence(ok bool) string {
	if ok {
		return "present"
	}
	return "absent"
}

// request compares a request record; nil means absent on that side.
func (c *diffs) request(id string, seq uint64, live, re *projection.RequestView) bool {
	r := &record{c: c, kind: KindRequest, id: id, seq: seq}
	if live == nil || re == nil {
		if live != nil || re != nil {
			r.add(FieldRecord, presence(live != nil), presence(re != nil), nil)
		}
		return r.differ
	}
	r.str("session_id", live.SessionID, re.SessionID)
	r.str("provider", live.Provider, re.Provider)
	r.str("model", live.Model, re.Model)
	r.str("status", live.Status, re.Status)
	r.num("attempts", int64(live.Attempts), int64(re.Attempts))
	r.num("winning_attempt", int64(live.WinningAttempt), int64(re.WinningAttempt))
	r.usage("usage", live.Usage, re.Usage)
	r.usage("billed", live.Billed, re.Billed)
	r.num("estimated_input_tokens", live.EstimatedInputTokens, re.EstimatedInputTokens)
	r.money(live.UsageCost, re.UsageCost, live.BilledCost, re.BilledCost, live.UnpricedUsageTokens, re.UnpricedUsageTokens,
		live.UnpricedBilledTokens, re.UnpricedBilledTokens)
	r.time("first_started_at", live.FirstStartedAt, re.FirstStartedAt)
	r.time("last_finished_at", live.LastFinishedAt, re.LastFinishedAt)
	r.str("labels", fmt.Sprint(map[string]string(live.Labels)), fmt.Sprint(map[string]string(re.Labels)))
	r.num("label_conflicts", live.LabelConflicts, re.LabelConflicts)
	r.str("cell", cellString(live.Cell), cellString(re.Cell))
	return r.differ
}

// money compares the money fields of a record (nano-USD) and its
// unpriced tokens.
func (r *record) money(usage, reUsage, billed, reBilled pricing.Money, unpricedUsage, reUnpricedUsage, unpricedBilled, reUnpricedBilled int64) {
	r.cost("usage_cost", usage, reUsage)
	r.cost("billed_cost", billed, reBilled)
	r.num("unpriced_usage_tokens", unpricedUsage, reUnpricedUsage)
	r.num("unpriced_billed_tokens", unpricedBilled, reUnpricedBilled)
}

// totals compares a session record or a rollup (kind); a missing record
// counts as zero totals, so that the deltas still add up. The Drift's
// deltas sum the sessions only (the rollups hold the same requests
// again).
func (c *diffs) totals(kind, id string, seq uint64, inLive, inRe bool, live, re projection.Totals) bool {
	r := &record{c: c, kind: kind, id: id, seq: seq}
	if inLive != inRe {
		r.add(FieldRecord, presence(inLive), presence(inRe), nil)
	}
	r.num("requests", live.Requests, re.Requests)
	r.num("succeeded", live.Succeeded, re.Succeeded)
	r.num("failed", live.Failed, re.Failed)
	r.num("pending", live.Pending, re.Pending)
	r.num("attempts", live.Attempts, re.Attempts)
	r.usage("usage", live.Usage, re.Usage)
	r.usage("billed", live.Billed, re.Billed)
	r.num("estimated_input_tokens", live.EstimatedInputTokens, re.EstimatedInputTokens)
	r.money(live.UsageCost, re.UsageCost, live.BilledCost, re.BilledCost, live.UnpricedUsageTokens, re.UnpricedUsageTokens,
		live.UnpricedBilledTokens, re.UnpricedBilledTokens)
	r.num("label_conflicts", live.LabelConflicts, re.LabelConflicts)
	if live.Saturated != re.Saturated {
		r.add("saturated", strconv.FormatBool(live.Saturated), strconv.FormatBool(re.Saturated), nil)
	}
	if kind != KindSession {
		return r.differ
	}
	c.d.UsageDelta = c.d.UsageDelta.Add(live.Usage.Sub(re.Usage))
	c.d.BilledDelta = c.d.BilledDelta.Add(live.Billed.Sub(re.Billed))
	c.d.UsageCostDelta += live.UsageCost - re.UsageCost
	c.d.BilledCostDelta += live.BilledCost - re.BilledCost
	c.d.UnpricedTokenDelta += live.UnpricedBilledTokens - re.UnpricedBilledTokens
	return r.differ
}
