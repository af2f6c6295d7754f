package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/sim/fakeprovider"
)

// rates are the test's prices of one model, in nano-US-dollars per token
// ($ per million tokens × 1,000): with at most three decimals in $/Mtok,
// every token costs a whole number of nano-dollars, so the test prices by
// integer products, with no rounding to get right.
type rates struct{ input, output, cacheRead, cacheWrite, cacheWrite1h, reasoning int64 }

// moneyRates are the prices of the models gateway.mjs calls, written out
// by hand. Every service tier of a model costs the same here: the fake
// provider's truth says what each attempt billed, not which tier its
// answer named (a timed-out attempt names none), so the truth can only be
// priced by hand where the tier does not matter. (Tiers are priced apart
// by TestPriceByHand.)
var moneyRates = map[string]rates{
	"anthropic/claude-sonnet-4-5":   {input: 3_000, output: 15_000, cacheRead: 300, cacheWrite: 3_750, cacheWrite1h: 6_000, reasoning: 15_000},
	"anthropic/claude-haiku-4-5":    {input: 1_000, output: 5_000, cacheRead: 100, cacheWrite: 1_250, cacheWrite1h: 2_000, reasoning: 5_000},
	"openai/gpt-4.1-mini":           {input: 400, output: 1_600, cacheRead: 100, cacheWrite: 400, cacheWrite1h: 400, reasoning: 2_000},
	"openai/text-embedding-3-small": {input: 20, output: 20, cacheRead: 20, cacheWrite: 20, cacheWrite1h: 20, reasoning: 20},
	"gemini/gemini-2.5-flash":       {input: 300, output: 2_500, cacheRead: 75, cacheWrite: 300, cacheWrite1h: 300, reasoning: 2_500},
}

// moneyTiers are the service tiers each provider's fake answers name.
var moneyTiers = map[string][]string{"anthropic": {"", "priority"}, "openai": {"", "flex", "priority"}, "gemini": {"", "flex"}}

// moneyFile is moneyRates as a catalog file, one entry per model and
// tier, every rate written out.
func moneyFile() []byte {
	dollars := func(nano int64) string { return strconv.Quote(fmt.Sprintf("%d.%03d", nano/1000, nano%1000)) }
	var entries []string
	for key, r := range moneyRates {
		p, m, _ := strings.Cut(key, "/")
		for _, tier := range moneyTiers[p] {
			entries = append(entries, fmt.Sprintf(`{"provider": %q, "model": %q, "service_tier": %q, "effective_from": "2020-01-01", `+
				`"input": %s, "output": %s, "cache_read": %s, "cache_write": %s, "cache_write_1h": %s, "reasoning": %s, `+
				`"source": "e2e/money_test.go", "read_on": "2026-12-04"}`,
				p, m, tier, dollars(r.input), dollars(r.output), dollars(r.cacheRead), dollars(r.cacheWrite), dollars(r.cacheWrite1h), dollars(r.reasoning)))
		}
	}
	return []byte(`{"entries": [` + strings.Join(entries, ",\n") + `]}`)
}

// byHand is the cost of usage u at r, by the contract's table: each
// token priced once (cache reads and writes are part of the input, the
// 1-hour write part of the writes, reasoning part of the output).
func byHand(u events.Usage, r rates) int64 {
	uncached := u.InputTokens - u.CacheReadInputTokens - u.CacheCreationInputTokens
	return uncached*r.input + u.CacheReadInputTokens*r.cacheRead +
		(u.CacheCreationInputTokens-u.CacheCreation1hInputTokens)*r.cacheWrite + u.CacheCreation1hInputTokens*r.cacheWrite1h +
		(u.OutputTokens-u.ReasoningTokens)*r.output + u.ReasoningTokens*r.reasoning
}

// findFallbackID returns a request ID whose attempt 0 is a broken stream
// (billed, cut after it began: the client sees the failure) and whose
// attempt 1 succeeds.
func findFallbackID(t *testing.T, p fakeprovider.Plan, prefix string) string {
	t.Helper()
	for i := range 1_000_000 {
		id := prefix + "-" + strconv.Itoa(i)
		if p.Decide(id, 0).Fault == fakeprovider.FaultBrokenStream && p.Decide(id, 1).Fault == fakeprovider.FaultNone {
			return id
		}
	}
	t.Fatal("no request ID with a broken stream then a success")
	return ""
}

// The official npm clients through the gateway, every route, streaming
// and not, against the fake provider with every fault (retries, billed
// failures, broken streams), plus a client that falls back from a broken
// Claude Sonnet stream to Claude Haiku under the same request ID: once the
// aggregator has caught up, the ledger's money equals the fake provider's
// truth (what it says each attempt billed, less what no answer showed)
// priced by hand at the test's own literal rates (moneyRates), request by
// request and session by session: usage_cost is the winning attempt's
// usage at its model's price, billed_cost every attempt at its own
// model's price (the fallback's two models each at their own), and no
// token is unpriced.
func TestGatewayNodeClientsMoneyEqualsTruthPricedByHand(t *testing.T) {
	node := nodeOrSkip(t)
	rig := newRig(t, fakeprovider.Options{Seed: 31, Mix: faultMix}, rigPolicy(), moneyFile())
	fallback := findFallbackID(t, rig.fp.Plan(), "node-fallback")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "gateway.mjs")
	cmd.Dir = "node"
	cmd.Env = append(os.Environ(), "GATEWAY_URL="+rig.url, "RUN=money", "CALLS=4", "FALLBACK_ID="+fallback)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "node: %s", stderr.String())
	var res struct {
		Fallback *struct {
			FirstFailed bool   `json:"first_failed"`
			OK          bool   `json:"ok"`
			Error       string `json:"error"`
		} `json:"fallback"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &res), "node printed: %s", stdout.String())
	require.NotNil(t, res.Fallback)
	require.True(t, res.Fallback.FirstFailed, "the Sonnet stream broke")
	require.True(t, res.Fallback.OK, "the fallback to Haiku succeeded: %s", res.Fallback.Error)

	truth := rig.requireLedgerEqualsTruth(t) // the tokens first
	type money struct{ usage, billed int64 }
	sessions := map[string]money{}
	var retried, broken int
	for id, rt := range truth.Requests {
		var want money
		won := false
		for _, a := range rt.Attempts {
			r, ok := moneyRates[rt.Provider+"/"+a.Model]
			require.True(t, ok, "request %s attempt %d: no test price for %s %s", id, a.Attempt, rt.Provider, a.Model)
			want.billed += byHand(a.Billed.Sub(a.Unobservable), r)
			if a.Outcome == fakeprovider.FaultNone && !won {
				want.usage, won = byHand(a.Billed, r), true
			}
			if a.Outcome == fakeprovider.FaultBrokenStream {
				broken++
			}
		}
		if len(rt.Attempts) > 1 {
			retried++
		}
		got := rig.ledger.Request(t, id)
		assert.Equal(t, want.usage, got.UsageCost, "request %s usage_cost", id)
		assert.Equal(t, want.billed, got.BilledCost, "request %s billed_cost", id)
		assert.Zero(t, got.UnpricedBilledTokens, "request %s: every attempt is priced", id)
		s := sessions[rt.SessionID]
		sessions[rt.SessionID] = money{s.usage + want.usage, s.billed + want.billed}
	}
	for id, want := range sessions {
		got := rig.ledger.Session(t, id)
		assert.Equal(t, want.usage, got.UsageCost, "session %s usage_cost", id)
		assert.Equal(t, want.billed, got.BilledCost, "session %s billed_cost", id)
		assert.Zero(t, got.UnpricedBilledTokens, "session %s", id)
	}

	// The fallback, by hand: attempt 0 on Sonnet, billed what its broken
	// stream showed; attempt 1 on Haiku, its usage.
	ft := truth.Requests[fallback]
	require.Len(t, ft.Attempts, 2)
	assert.Equal(t, "claude-sonnet-4-5", ft.Attempts[0].Model)
	assert.Equal(t, "claude-haiku-4-5", ft.Attempts[1].Model)
	sonnet := byHand(ft.Attempts[0].Billed.Sub(ft.Attempts[0].Unobservable), moneyRates["anthropic/claude-sonnet-4-5"])
	haiku := byHand(ft.Attempts[1].Billed, moneyRates["anthropic/claude-haiku-4-5"])
	assert.Positive(t, sonnet, "the broken stream billed its input")
	fr := rig.ledger.Request(t, fallback)
	assert.Equal(t, haiku, fr.UsageCost, "usage: the Haiku attempt at Haiku's price")
	assert.Equal(t, sonnet+haiku, fr.BilledCost, "billed: each attempt at its own model's price")
	assert.Positive(t, retried, "some requests were retried")
	assert.Positive(t, broken, "some streams broke")
}
