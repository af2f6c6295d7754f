package report

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/pricing"
	"github.com/agentledger/ledger/internal/projection"
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
