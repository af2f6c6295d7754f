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
// writes, so only 120 tokens are uncached input. Pricing the creation
// also as input (LiteLLM #9812) or the reads as input (LiteLLM #11789)
// gives another total.
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
	// uncached   120 x 3.00 $/M  = 360,000 nano-USD
	// read      1800 x 0.30 $/M  = 540,000
	// write      234 x 3.75 $/M  = 877,500
	// output      87 x 15.00 $/M = 1,305,000
	// total                        3,082,500 nano-USD = $0.0030825
	want := Cost{Total: 3_082_500, Input: 360_000, CacheRead: 540_000, CacheWrite: 877_500, Output: 1_305_000}
	if cost != want {
		t.Fatalf("cost = %+v, want %+v", cost, want)
	}
}

// reasoningFile prices reasoning apart (no provider of the default
// catalog does: there reasoning tokens are output tokens).
const reasoningFile = `{"entries":[{"provider":"example","model":"thinker","effective_from":"2026-01-01",
	"input":"1","output":"4","reasoning":"8","source":"https://example.test","read_on":"2026-12-04"}]}`

// TestPriceByHand is the price table worked through by hand, one row per
// rule: the comments are the hand computation (tokens x $/Mtok = nano-USD:
// tokens x price x 1,000), the integers the code's.
func TestPriceByHand(t *testing.T) {
	def := Default()
	thinker := mustParse(t, reasoningFile)
	for _, tc := range []struct {
		name string
		c    *Catalog
		a    Attempt
		want Cost
	}{
		{
			// Claude Opus 5: $5 in, $25 out, $0.50 read, $6.25 5m write, $10 1h write.
			// input 10,000 = 1,000 uncached + 6,000 read + 3,000 written (1,000 of them 1h).
			//   uncached 1,000 x 5     =  5,000,000
			//   read     6,000 x 0.50  =  3,000,000
			//   write 5m 2,000 x 6.25  = 12,500,000
			//   write 1h 1,000 x 10    = 10,000,000  (CacheWrite 22,500,000)
			//   output   1,500 x 25    = 37,500,000  (2,000 output - 500 reasoning)
			//   thinking   500 x 25    = 12,500,000  (Anthropic bills thinking as output)
			//   total                    80,500,000 = $0.0805
			name: "anthropic cache read and 5m/1h writes, thinking as output",
			c:    def,
			a: Attempt{Provider: "anthropic", Model: "claude-opus-5-20260724", At: day("2026-08-01"),
				Usage: events.Usage{InputTokens: 10_000, OutputTokens: 2_000, CacheReadInputTokens: 6_000,
					CacheCreationInputTokens: 3_000, CacheCreation1hInputTokens: 1_000, ReasoningTokens: 500}},
			want: Cost{Total: 80_500_000, Input: 5_000_000, CacheRead: 3_000_000, CacheWrite: 22_500_000, Output: 37_500_000, Reasoning: 12_500_000},
		},
		{
			// Claude Sonnet 4.5 above 200K input tokens (cache reads included): the
			// whole request at $6 in, $22.50 out, $0.60 read.
			//   uncached  50,000 x 6     = 300,000,000
			//   read     200,000 x 0.60  = 120,000,000
			//   output     1,000 x 22.50 =  22,500,000
			//   total                      442,500,000 = $0.4425
			name: "anthropic long context",
			c:    def,
			a: Attempt{Provider: "anthropic", Model: "claude-sonnet-4-5", At: day("2026-08-01"),
				Usage: events.Usage{InputTokens: 250_000, OutputTokens: 1_000, CacheReadInputTokens: 200_000}},
			want: Cost{Total: 442_500_000, Input: 300_000_000, CacheRead: 120_000_000, Output: 22_500_000},
		},
		{
			// Exactly 200K is not above 200K: 200,000 x 3 = 600,000,000.
			name: "anthropic long context boundary, at the threshold",
			c:    def,
			a: Attempt{Provider: "anthropic", Model: "claude-sonnet-4-5", At: day("2026-08-01"),
				Usage: events.Usage{InputTokens: 200_000}},
			want: Cost{Total: 600_000_000, Input: 600_000_000},
		},
		{
			// One more token and every token is at $6: 200,001 x 6 = 1,200,006,000.
			name: "anthropic long context boundary, one above",
			c:    def,
			a: Attempt{Provider: "anthropic", Model: "claude-sonnet-4-5", At: day("2026-08-01"),
				Usage: events.Usage{InputTokens: 200_001}},
			want: Cost{Total: 1_200_006_000, Input: 1_200_006_000},
		},
		{
			// Claude Haiku 4.5 on the Batch API: half of $1/$5, caching multipliers on top:
			// $0.50 in, $2.50 out, $0.05 read, $0.625 5m write.
			//   uncached 500 x 0.50  = 250,000
			//   read     400 x 0.05  =  20,000
			//   write    100 x 0.625 =  62,500
			//   output   200 x 2.50  = 500,000
			//   total                  832,500
			name: "anthropic batch tier",
			c:    def,
			a: Attempt{Provider: "anthropic", Model: "claude-haiku-4-5-20251001", ServiceTier: "batch", At: day("2026-08-01"),
				Usage: events.Usage{InputTokens: 1_000, OutputTokens: 200, CacheReadInputTokens: 400, CacheCreationInputTokens: 100}},
			want: Cost{Total: 832_500, Input: 250_000, CacheRead: 20_000, CacheWrite: 62_500, Output: 500_000},
		},
		{
			// GPT-6.2 Sol above 272K input tokens: input and cache rates double,
			// output 1.5x: $4 in, $0.20 read, $5 write, $15 out; reasoning is output.
			//   uncached 150,000 x 4    = 600,000,000
			//   read     100,000 x 0.20 =  20,000,000
			//   write     50,000 x 5    = 250,000,000
			//   output     6,000 x 15   =  90,000,000
			//   reasoning  4,000 x 15   =  60,000,000
			//   total                  1,020,000,000 = $1.02
			name: "openai long context, reasoning as output",
			c:    def,
			a: Attempt{Provider: "openai", Model: "gpt-6.2-sol-2026-11-20", At: day("2026-12-04"),
				Usage: events.Usage{InputTokens: 300_000, OutputTokens: 10_000, CacheReadInputTokens: 100_000,
					CacheCreationInputTokens: 50_000, ReasoningTokens: 4_000}},
			want: Cost{Total: 1_020_000_000, Input: 600_000_000, CacheRead: 20_000_000, CacheWrite: 250_000_000, Output: 90_000_000, Reasoning: 60_000_000},
		},
		{
			// GPT-6 Luna on the flex tier: half of $0.10 / $0.01 / $0.50.
			//   uncached 1,000 x 0.05  = 50,000
			//   read     2,000 x 0.005 = 10,000
			//   output     333 x 0.25  = 83,250
			//   total                   143,250
			name: "openai flex tier",
			c:    def,
			a: Attempt{Provider: "openai", Model: "gpt-6-luna", ServiceTier: "flex", At: day("2026-10-01"),
				Usage: events.Usage{InputTokens: 3_000, OutputTokens: 333, CacheReadInputTokens: 2_000}},
			want: Cost{Total: 143_250, Input: 50_000, CacheRead: 10_000, Output: 83_250},
		},
		{
			// OpenAI reports the standard tier as "default" (the contract records
			// "standard"): both are the standard entry. 1,000 x 0.10 = 100,000.
			name: "openai default tier is standard",
			c:    def,
			a: Attempt{Provider: "openai", Model: "gpt-6-luna", ServiceTier: "default", At: day("2026-10-01"),
				Usage: events.Usage{InputTokens: 1_000}},
			want: Cost{Total: 100_000, Input: 100_000},
		},
		{
			// Gemini 2.5 Pro up to 200k: $1.25 in, $0.125 read, $10 out; thoughts are output
			// (the page: "Output price (including thinking tokens)").
			//   uncached  20,000 x 1.25  = 25,000,000
			//   read     100,000 x 0.125 = 12,500,000
			//   output       500 x 10    =  5,000,000
			//   thoughts   1,500 x 10    = 15,000,000
			//   total                      57,500,000
			name: "gemini cache read, thoughts as output",
			c:    def,
			a: Attempt{Provider: "gemini", Model: "gemini-2.5-pro-preview-06-05", At: day("2026-08-01"),
				Usage: events.Usage{InputTokens: 120_000, OutputTokens: 2_000, CacheReadInputTokens: 100_000, ReasoningTokens: 1_500}},
			want: Cost{Total: 57_500_000, Input: 25_000_000, CacheRead: 12_500_000, Output: 5_000_000, Reasoning: 15_000_000},
		},
		{
			// Gemini 2.5 Pro above 200k: 300,000 x 2.50 + 1,000 x 15 = 750,000,000 + 15,000,000.
			name: "gemini long context",
			c:    def,
			a: Attempt{Provider: "gemini", Model: "models/gemini-2.5-pro", At: day("2026-08-01"),
				Usage: events.Usage{InputTokens: 300_000, OutputTokens: 1_000}},
			want: Cost{Total: 765_000_000, Input: 750_000_000, Output: 15_000_000},
		},
		{
			// Gemini 2.5 Pro above 200k prompt tokens, cache reads included (the
			// contract's worked Gemini example): the whole request at $2.50 in,
			// $0.25 read, $15 out; thoughts at the output rate.
			//   uncached  50,000 x 2.50 = 125,000,000
			//   read     200,000 x 0.25 =  50,000,000
			//   output     2,000 x 15   =  30,000,000
			//   thoughts   1,000 x 15   =  15,000,000
			//   total                     220,000,000 = $0.22
			name: "gemini long context with a cache read and thoughts",
			c:    def,
			a: Attempt{Provider: "gemini", Model: "gemini-2.5-pro-001", At: day("2026-12-04"),
				Usage: events.Usage{InputTokens: 250_000, OutputTokens: 3_000, CacheReadInputTokens: 200_000, ReasoningTokens: 1_000}},
			want: Cost{Total: 220_000_000, Input: 125_000_000, CacheRead: 50_000_000, Output: 30_000_000, Reasoning: 15_000_000},
		},
		{
			// Exactly 200k prompt tokens is not above 200k: 200,000 x 1.25 = 250,000,000.
			name: "gemini long context boundary, at the threshold",
			c:    def,
			a: Attempt{Provider: "gemini", Model: "gemini-2.5-pro", At: day("2026-12-04"),
				Usage: events.Usage{InputTokens: 200_000}},
			want: Cost{Total: 250_000_000, Input: 250_000_000},
		},
		{
			// Gemini 2.5 Flash on the Batch API (the page's Batch table: $0.15 in,
			// $1.25 out; the cache price stays $0.03).
			//   uncached 6,000 x 0.15 = 900,000
			//   read     4,000 x 0.03 = 120,000
			//   output     400 x 1.25 = 500,000
			//   thoughts   600 x 1.25 = 750,000
			//   total                  2,270,000
			name: "gemini batch tier",
			c:    def,
			a: Attempt{Provider: "gemini", Model: "gemini-2.5-flash-preview-09-2025", ServiceTier: "batch", At: day("2026-12-04"),
				Usage: events.Usage{InputTokens: 10_000, OutputTokens: 1_000, CacheReadInputTokens: 4_000, ReasoningTokens: 600}},
			want: Cost{Total: 2_270_000, Input: 900_000, CacheRead: 120_000, Output: 500_000, Reasoning: 750_000},
		},
		{
			// Gemini 3.1 Pro Preview on the Priority tier, up to 200k: $3.60 in,
			// $0.36 read, $21.60 out.
			//   uncached 50,000 x 3.60  = 180,000,000
			//   read     50,000 x 0.36  =  18,000,000
			//   output      500 x 21.60 =  10,800,000
			//   thoughts  1,500 x 21.60 =  32,400,000
			//   total                     241,200,000
			name: "gemini priority tier",
			c:    def,
			a: Attempt{Provider: "gemini", Model: "gemini-3.1-pro-preview", ServiceTier: "priority", At: day("2026-12-04"),
				Usage: events.Usage{InputTokens: 100_000, OutputTokens: 2_000, CacheReadInputTokens: 50_000, ReasoningTokens: 1_500}},
			want: Cost{Total: 241_200_000, Input: 180_000_000, CacheRead: 18_000_000, Output: 10_800_000, Reasoning: 32_400_000},
		},
		{
			// GPT-4.1 mini with cached input: $0.40 in, $0.10 cached, $1.60 out.
			//   uncached 2,000 x 0.40 =   800,000
			//   cached   3,000 x 0.10 =   300,000
			//   output     700 x 1.60 = 1,120,000
			//   total                   2,220,000
			name: "openai older model, cached input",
			c:    def,
			a: Attempt{Provider: "openai", Model: "gpt-4.1-mini-2025-04-14", At: day("2026-03-01"),
				Usage: events.Usage{InputTokens: 5_000, OutputTokens: 700, CacheReadInputTokens: 3_000}},
			want: Cost{Total: 2_220_000, Input: 800_000, CacheRead: 300_000, Output: 1_120_000},
		},
		{
			// GPT-4.1 mini on the priority tier (OpenAI's Priority processing page):
			// $0.70 in, $0.175 cached, $2.80 out.
			//   uncached 600 x 0.70  = 420,000
			//   cached   400 x 0.175 =  70,000
			//   output   100 x 2.80  = 280,000
			//   total                  770,000
			name: "openai older model, priority tier",
			c:    def,
			a: Attempt{Provider: "openai", Model: "gpt-4.1-mini", ServiceTier: "priority", At: day("2026-12-04"),
				Usage: events.Usage{InputTokens: 1_000, OutputTokens: 100, CacheReadInputTokens: 400}},
			want: Cost{Total: 770_000, Input: 420_000, CacheRead: 70_000, Output: 280_000},
		},
		{
			// A preset: DeepSeek's deepseek-chat (V4 Flash), cache hit $0.0028.
			//   miss  2,000 x 0.14   = 280,000
			//   hit   8,000 x 0.0028 =  22,400
			//   output 1,000 x 0.28  = 280,000
			//   total                  582,400
			name: "preset cache hit",
			c:    def,
			a: Attempt{Provider: "deepseek", Model: "deepseek-chat", At: day("2026-12-04"),
				Usage: events.Usage{InputTokens: 10_000, OutputTokens: 1_000, CacheReadInputTokens: 8_000}},
			want: Cost{Total: 582_400, Input: 280_000, CacheRead: 22_400, Output: 280_000},
		},
		{
			// Reasoning priced apart: 750 x 4 + 250 x 8 = 3,000,000 + 2,000,000.
			name: "reasoning priced apart",
			c:    thinker,
			a: Attempt{Provider: "example", Model: "thinker", At: day("2026-08-01"),
				Usage: events.Usage{OutputTokens: 1_000, ReasoningTokens: 250}},
			want: Cost{Total: 5_000_000, Output: 3_000_000, Reasoning: 2_000_000},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.c.Price(tc.a)
			if !ok {
				t.Fatalf("no price for %+v", tc.a)
			}
			if got != tc.want {
				t.Fatalf("cost = %+v\nwant   %+v", got, tc.want)
			}
			checkParts(t, got)
		})
	}
}

// checkParts fails when the parts do not add up to Total or one is
// negative.
func checkParts(t *testing.T, c Cost) {
	t.Helper()
	if sum := c.Input + c.Output + c.CacheRead + c.CacheWrite + c.Reasoning; sum != c.Total {
		t.Fatalf("parts of %+v add up to %d, not Total", c, sum)
	}
	for _, m := range []Money{c.Total, c.Input, c.Output, c.CacheRead, c.CacheWrite, c.Reasoning} {
		if m < 0 {
			t.Fatalf("negative part in %+v", c)
		}
	}
}

// TestPriceUnpriced: no entry for the provider, the model, the tier or
// the time is false, never a cost of 0.
func TestPriceUnpriced(t *testing.T) {
	def := Default()
	u := events.Usage{InputTokens: 100, OutputTokens: 10}
	for _, a := range []Attempt{
		{Provider: "anthropic", Model: "claude-unknown-9", At: day("2026-08-01"), Usage: u},
		{Provider: "nobody", Model: "claude-opus-5", At: day("2026-08-01"), Usage: u},
		{Provider: "anthropic", Model: "claude-opus-5", ServiceTier: "priority", At: day("2026-08-01"), Usage: u},
		{Provider: "openai", Model: "gpt-6.2-sol", ServiceTier: "scale", At: day("2026-12-04"), Usage: u},
		{Provider: "anthropic", Model: "claude-opus-5", At: day("2026-07-23"), Usage: u}, // before its first entry
		{Provider: "anthropic", Model: "claude-opus-5", Usage: u},                        // no time
		{Provider: "gemini", Model: "gemini-2.5-flash", At: day("2026-06-01"), Usage: u}, // before the page read
		{Provider: "openai", Model: "gpt-4.1-mini", ServiceTier: "flex", At: day("2026-12-04"), Usage: u},
		{Provider: "openai", Model: "gpt-4o", At: day("2026-12-04"), Usage: u}, // no official page read
		{Provider: "vllm", Model: "meta-llama/Llama-3.3-70B-Instruct", At: day("2026-12-04"), Usage: u},
		{Provider: "ollama", Model: "llama3.3", At: day("2026-12-04"), Usage: u},
	} {
		if cost, ok := def.Price(a); ok {
			t.Errorf("Price(%+v) = %+v, true; want no price", a, cost)
		}
	}
	var nilCatalog *Catalog
	if _, ok := nilCatalog.Price(Attempt{Provider: "anthropic", Model: "claude-opus-5", At: day("2026-08-01")}); ok {
		t.Error("a nil catalog priced an attempt")
	}
}

// TestPriceDatedEntries: a price change is a new dated entry; each
// attempt is priced at the entry effective at its own time.
func TestPriceDatedEntries(t *testing.T) {
	c := mustParse(t, `{"entries":[
		{"provider":"anthropic","model":"claude-sonnet-5-5","effective_from":"2026-10-07","input":"2","output":"10","cache_read":"0.10","source":"https://example.test/b","read_on":"2026-12-04"},
		{"provider":"anthropic","model":"claude-sonnet-5-5","effective_from":"2026-09-28","input":"2","output":"10","cache_read":"0.20","source":"https://example.test/a","read_on":"2026-10-01"},
		{"provider":"anthropic","model":"claude-sonnet-5-5-20261001","effective_from":"2026-10-01","input":"1","output":"1","source":"https://example.test/c","read_on":"2026-10-01"}]}`)
	u := events.Usage{InputTokens: 1_000_000, CacheReadInputTokens: 1_000_000}
	for _, tc := range []struct {
		model string
		at    time.Time
		want  Money
		ok    bool
	}{
		{"claude-sonnet-5-5", day("2026-09-27"), 0, false},
		{"claude-sonnet-5-5", day("2026-09-28"), 200_000_000, true},                       // 1M reads x $0.20
		{"claude-sonnet-5-5", day("2026-10-07").Add(-time.Nanosecond), 200_000_000, true}, // last instant of the old price
		{"claude-sonnet-5-5", day("2026-10-07"), 100_000_000, true},                       // 1M reads x $0.10
		{"claude-sonnet-5-5-20260929", day("2026-10-08"), 100_000_000, true},              // its family's entry
		{"claude-sonnet-5-5-20261001", day("2026-10-08"), 1_000_000_000, true},            // its own entry: 1M reads x $1 (cache_read defaults to input)
		{"claude-sonnet-5-5-20261001", day("2026-09-30"), 200_000_000, true},              // before its own entry: the family's
	} {
		cost, ok := c.Price(Attempt{Provider: "anthropic", Model: tc.model, At: tc.at, Usage: u})
		if ok != tc.ok || cost.Total != tc.want {
			t.Errorf("%s at %s: %d, %v; want %d, %v", tc.model, tc.at, cost.Total, ok, tc.want, tc.ok)
		}
	}
}

// TestPriceRoundsOnceHalfToEven: each part below is exactly half a
// nano-dollar. Rounding the parts would lose both halves; rounding the
// sum once keeps them, half to even.
func TestPriceRoundsOnceHalfToEven(t *testing.T) {
	// 0.0005 $/Mtok = Rate 500,000 = 0.5 nano-USD per token.
	c := mustParse(t, `{"entries":[{"provider":"p","model":"m","effective_from":"2026-01-01",
		"input":"0.0005","output":"0.0005","source":"https://example.test","read_on":"2026-12-04"}]}`)
	for _, tc := range []struct {
		u    events.Usage
		want Cost
	}{
		{events.Usage{InputTokens: 1}, Cost{}},                                     // 0.5 -> 0 (even)
		{events.Usage{InputTokens: 3}, Cost{Total: 2, Input: 2}},                   // 1.5 -> 2
		{events.Usage{InputTokens: 5}, Cost{Total: 2, Input: 2}},                   // 2.5 -> 2
		{events.Usage{InputTokens: 7}, Cost{Total: 4, Input: 4}},                   // 3.5 -> 4
		{events.Usage{InputTokens: 1, OutputTokens: 1}, Cost{Total: 1, Output: 1}}, // 0.5 + 0.5 = 1, not 0 + 0
		{events.Usage{InputTokens: 1, OutputTokens: 2}, Cost{Total: 2, Output: 2}}, // 0.5 + 1.0 = 1.5 -> 2
	} {
		got, _ := c.Price(Attempt{Provider: "p", Model: "m", At: day("2026-06-01"), Usage: tc.u})
		if got != tc.want {
			t.Errorf("%+v: %+v, want %+v", tc.u, got, tc.want)
		}
		checkParts(t, got)
	}
}

// TestPriceLargeCounts: counts far beyond int64 x Rate are exact (128
// bits) and a Money beyond int64 saturates instead of wrapping.
func TestPriceLargeCounts(t *testing.T) {
	c := mustParse(t, `{"entries":[{"provider":"p","model":"m","effective_from":"2026-01-01",
		"input":"999999999.999999999","output":"75","source":"https://example.test","read_on":"2026-12-04"}]}`)
	// 10^12 output tokens x $75/Mtok = $75,000,000 = 75 x 10^15 nano-USD.
	got, _ := c.Price(Attempt{Provider: "p", Model: "m", At: day("2026-06-01"), Usage: events.Usage{OutputTokens: 1_000_000_000_000}})
	if got.Total != 75_000_000_000_000_000 {
		t.Fatalf("10^12 x $75/M = %d nano-USD, want 75e15", got.Total)
	}
	// 9.2e18 tokens x ~1e9 $/M does not fit Money: it saturates.
	got, _ = c.Price(Attempt{Provider: "p", Model: "m", At: day("2026-06-01"), Usage: events.Usage{InputTokens: 1 << 62, OutputTokens: 1 << 62}})
	if got.Total != 1<<63-1 {
		t.Fatalf("huge usage = %d, want the largest Money", got.Total)
	}
	checkParts(t, got)
}
