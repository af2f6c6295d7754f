package pricing

import (
	"testing"
	"time"

	"github.com/agentledger/ledger/internal/events"
)

// mustParse parses a catalog file or fails the test.
func mustParse(t testing.TB, data string) *Catalog {
	t.Helper()
	c, err := Parse([]byte(data))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c
}

func day(s string) time.Time {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		panic(err)
	}
	return t
}

// TestPriceNeverPricesATokenTwice is the contract's example event priced
// by hand: input_tokens 2154 INCLUDES 1800 cache reads and 234 cache
// writes, so only 120 tokens are uncached input (LiteLLM #9812 priced the
// creation twice, #11789 the reads as input).
func TestPriceNeverPricesATokenTwice(t *testing.T) {
	c := mustParse(t, `{"entries":[{"provider":"anthropic","model":"claude-sonnet-4-5","effective_from":"2025-09-29",
		"input":"3","output":"15","cache_read":"0.30","cache_write":"3.75","cache_write_1h":"6",
		"source":"https://example.test/pricing","read_on":"2026-12-04"}]}`)
	cost, ok := c.Price(Attempt{
		Provider: "anthropic", Model: "claude-sonnet-4-5-20250929", At: day("2026-03-14"),
		Usage: events.Usage{InputTokens: 2154, OutputTokens: 87, CacheReadInputTokens: 1800, CacheCreationInputTokens: 234},
	})
	if !ok {
		t.Fatal("no price")
	}
	// uncached   120 x 3.00 $/M  = 360,000 nano
	// read      1800 x 0.30 $/M  = 540,000 nano
	// write      234 x 3.75 $/M  = 877,500 nano
	// output      87 x 15.00 $/M = 1,305,000 nano
	// total                        3,082,500 nano = $0.0030825
	want := Cost{Total: 3_082_500, Input: 360_000, CacheRead: 540_000, CacheWrite: 877_500, Output: 1_305_000}
	if cost != want {
		t.Fatalf("cost = %+v, want %+v", cost, want)
	}
}
