package report

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/pricing"
	"github.com/agentledger/ledger/internal/projection"
	"github.com/agentledger/ledger/internal/topology"
)

// fleet describes a generated ledger: requests spread at random over
// hours from start, models (with their provider), teams and users (each
// user in one team); some requests carry no team, some are unpriced.
type fleet struct {
	requests     int
	start        time.Time
	hours        int
	models       []string
	teams, users int
}

// genRollups returns the rollups of f's requests (one per cell, as the
// projection writes them), drawn with rng.
func genRollups(rng *rand.Rand, f fleet) []projection.Rollup {
	type ckey struct {
		hour        int
		model, user int
	}
	cells := map[ckey]*projection.Rollup{}
	for range f.requests {
		k := ckey{rng.IntN(f.hours), rng.IntN(len(f.models)), rng.IntN(f.users + 1)}
		r, ok := cells[k]
		if !ok {
			r = &projection.Rollup{Cell: projection.Cell{
				Hour:     f.start.Add(time.Duration(k.hour) * time.Hour),
				Provider: providerOf(f.models[k.model]), Model: f.models[k.model],
			}, Rules: 1}
			if k.user > 0 { // user 0: a request without labels
				r.Labels = api.Labels{"team": fmt.Sprintf("team-%02d", k.user%f.teams), "user": fmt.Sprintf("u-%d", k.user)}
			}
			cells[k] = r
		}
		r.Totals = r.Totals.Add(genRequest(rng))
	}
	out := make([]projection.Rollup, 0, len(cells))
	for _, r := range cells {
		out = append(out, *r)
	}
	return out
}

// genRequest is one request's contribution: 1 to 3 attempts, the failed
// ones billed, every fifth one unpriced.
func genRequest(rng *rand.Rand) projection.Totals {
	attempts := 1 + rng.IntN(3)
	u := events.Usage{InputTokens: 100 + rng.Int64N(1000), OutputTokens: 10 + rng.Int64N(500)}
	t := projection.Totals{Requests: 1, Succeeded: 1, Attempts: int64(attempts), Usage: u}
	for range attempts {
		t.Billed = t.Billed.Add(u)
	}
	if rng.IntN(5) == 0 {
		t.UnpricedUsageTokens = u.InputTokens + u.OutputTokens
		t.UnpricedBilledTokens = t.Billed.InputTokens + t.Billed.OutputTokens
		return t
	}
	t.UsageCost = pricing.Money(u.InputTokens*3000 + u.OutputTokens*15000)
	t.BilledCost = t.UsageCost * pricing.Money(attempts)
	return t
}

func providerOf(model string) string {
	switch model[0] {
	case 'c':
		return "anthropic"
	case 'g':
		if model[1] == 'p' {
			return "openai"
		}
		return "gemini"
	}
	return "other"
}

// inGrains returns the cells of grain g that hold the hour cells hours:
// each hour cell's totals added to its cell of g (Cell.In), as the
// projection counts a request in one cell of each grain; for GrainHour,
// hours itself.
func inGrains(hours []projection.Rollup, g projection.Grain) []projection.Rollup {
	if g == projection.GrainHour {
		return hours
	}
	cells := map[string]*projection.Rollup{}
	var keys []string
	for _, h := range hours {
		c := h.In(g)
		k := c.Key()
		r, ok := cells[k]
		if !ok {
			r = &projection.Rollup{Cell: c, Seq: h.Seq, Rules: h.Rules}
			cells[k] = r
			keys = append(keys, k)
		}
		r.Totals = r.Totals.Add(h.Totals)
		r.Seq = max(r.Seq, h.Seq)
	}
	out := make([]projection.Rollup, len(keys))
	for i, k := range keys {
		out[i] = *cells[k]
	}
	return out
}

// allGrains returns the hour cells hours and the cells of every coarser
// grain that hold them.
func allGrains(hours []projection.Rollup) []projection.Rollup {
	out := slices.Clone(hours)
	for _, g := range projection.Grains[1:] {
		out = append(out, inGrains(hours, g)...)
	}
	return out
}

// storeLedger stores rs in bucket ledger_rollups as the projection does
// (Rollup's encoder, Cell.Key) and a checkpoint at sequence seq that says
// whether every grain is whole (all_grains), as the projection writes it.
func storeLedger(tb testing.TB, js jetstream.JetStream, rs []projection.Rollup, seq uint64, all bool) {
	tb.Helper()
	ctx := context.Background()
	if _, err := topology.EnsureBucket(ctx, js, topology.Config{}, names.RollupsBucket, ""); err != nil {
		tb.Fatal(err)
	}
	for i := range rs {
		data, err := json.Marshal(&rs[i])
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := js.PublishAsync("$KV."+names.RollupsBucket+"."+rs[i].Key(), data); err != nil {
			tb.Fatal(err)
		}
		if i%1000 == 999 || i == len(rs)-1 {
			select {
			case <-js.PublishAsyncComplete():
			case <-ctx.Done():
			}
		}
	}
	state, err := topology.EnsureBucket(ctx, js, topology.Config{}, names.StateBucket, "")
	if err != nil {
		tb.Fatal(err)
	}
	cp, err := json.Marshal(struct {
		Seq       uint64 `json:"seq"`
		AllGrains bool   `json:"all_grains,omitempty"`
	}{seq, all})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := state.Put(ctx, names.CheckpointKey, cp); err != nil {
		tb.Fatal(err)
	}
}

// randomQuery draws a query of the rollups of a ledger of hours hours
// from h0: one to three dimensions of dims (not hour with day), an order,
// and bounds, each open or a whole hour in range (day starts, when
// days, so that labels may be answered by days).
func randomQuery(tb testing.TB, rng *rand.Rand, dims []string, hours int, days bool) Query {
	tb.Helper()
	var by []string
	for _, p := range rng.Perm(len(dims))[:1+rng.IntN(3)] {
		if d := dims[p]; !(d == "hour" && slices.Contains(by, "day")) && !(d == "day" && slices.Contains(by, "hour")) {
			by = append(by, d)
		}
	}
	ds, err := ParseBy(strings.Join(by, ","))
	if err != nil {
		tb.Fatal(err)
	}
	q := Query{By: ds, Sort: []Sort{SortNone, SortOverhead, SortBilled, SortCost, SortRequests}[rng.IntN(5)]}
	bound := func(lo int) time.Time {
		h := lo + rng.IntN(hours-lo+1)
		if days {
			h -= h % 24
		}
		return h0.Add(time.Duration(h) * time.Hour)
	}
	if rng.IntN(2) == 0 {
		q.Since = bound(0)
	}
	if rng.IntN(2) == 0 {
		lo := 1
		if !q.Since.IsZero() {
			lo = int(q.Since.Sub(h0)/time.Hour) + 1
			if days {
				lo += 23
			}
		}
		if lo <= hours {
			q.Until = bound(lo)
		}
	}
	if err := q.Validate(); err != nil {
		tb.Fatal(err)
	}
	return q
}
