package pricing

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/agentledger/ledger/internal/events"
)

// randomUsage returns a valid usage (the subsets within their totals),
// with counts up to max.
func randomUsage(r *rand.Rand, max int64) events.Usage {
	read := r.Int64N(max)
	create := r.Int64N(max)
	out := r.Int64N(max)
	return events.Usage{
		InputTokens:                read + create + r.Int64N(max),
		CacheReadInputTokens:       read,
		CacheCreationInputTokens:   create,
		CacheCreation1hInputTokens: r.Int64N(create + 1),
		OutputTokens:               out,
		ReasoningTokens:            r.Int64N(out + 1),
	}
}

// TestPriceMonotonic: one more token of any kind never lowers the cost,
// whatever the entry, tier or long-context threshold crossed, for every
// entry of the default catalog.
func TestPriceMonotonic(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 7)) // fixed seed: the failure, if any, repeats
	grow := []struct {
		kind string
		add  func(u *events.Usage, k int64)
	}{
		{"uncached input", func(u *events.Usage, k int64) { u.InputTokens += k }},
		{"cache read", func(u *events.Usage, k int64) { u.InputTokens += k; u.CacheReadInputTokens += k }},
		{"5m cache write", func(u *events.Usage, k int64) { u.InputTokens += k; u.CacheCreationInputTokens += k }},
		{"1h cache write", func(u *events.Usage, k int64) {
			u.InputTokens += k
			u.CacheCreationInputTokens += k
			u.CacheCreation1hInputTokens += k
		}},
		{"output", func(u *events.Usage, k int64) { u.OutputTokens += k }},
		{"reasoning", func(u *events.Usage, k int64) { u.OutputTokens += k; u.ReasoningTokens += k }},
	}
	c := Default()
	for _, e := range c.Entries() {
		for range 200 {
			u := randomUsage(r, 150_000) // crosses the 200K and 272K thresholds
			before := e.Cost(u)
			for _, g := range grow {
				v := u
				g.add(&v, 1+r.Int64N(100_000))
				if after := e.Cost(v); after.Total < before.Total {
					t.Fatalf("%s: adding %s tokens lowered the cost from %d to %d\n%+v\n%+v", e.name(), g.kind, before.Total, after.Total, u, v)
				}
			}
		}
	}
}

// TestPriceNeverNegative: any usage, even one the contract refuses
// (negative counts, subsets larger than their totals), costs 0 or more
// and its parts add up to Total.
func TestPriceNeverNegative(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 8))
	n := func() int64 { return r.Int64N(2_000_000_000_000) - 1_000_000_000_000 }
	c := Default()
	entries := c.Entries()
	for range 20_000 {
		e := entries[r.IntN(len(entries))]
		u := events.Usage{InputTokens: n(), OutputTokens: n(), CacheReadInputTokens: n(),
			CacheCreationInputTokens: n(), CacheCreation1hInputTokens: n(), ReasoningTokens: n()}
		checkParts(t, e.Cost(u))
	}
}

// TestVersionIndependentOfOrder: the same entries in any order, or
// written with their defaults spelled out, have the same Version; one
// price changed changes it.
func TestVersionIndependentOfOrder(t *testing.T) {
	var file struct {
		Entries []json.RawMessage `json:"entries"`
	}
	if err := json.Unmarshal(DefaultFile(), &file); err != nil {
		t.Fatal(err)
	}
	want := Default().Version()
	r := rand.New(rand.NewPCG(19, 9))
	for range 20 {
		r.Shuffle(len(file.Entries), func(i, j int) { file.Entries[i], file.Entries[j] = file.Entries[j], file.Entries[i] })
		b, _ := json.Marshal(file)
		if got := mustParse(t, string(b)).Version(); got != want {
			t.Fatalf("shuffled file: version %s, want %s", got, want)
		}
	}
	// Written back with every rate given: the same prices, the same version.
	b, err := json.Marshal(Default())
	if err != nil {
		t.Fatal(err)
	}
	if got := mustParse(t, string(b)).Version(); got != want {
		t.Fatalf("MarshalJSON then Parse: version %s, want %s", got, want)
	}
	// cache_write_1h left out is cache_write: same prices, same version.
	a := mustParse(t, `{"entries":[{"provider":"p","model":"m","effective_from":"2026-01-01","input":"1","output":"2","cache_write":"1.25","source":"a","read_on":"2026-12-01"}]}`)
	bb := mustParse(t, `{"entries":[{"provider":"p","model":"m","effective_from":"2026-01-01","input":"1.000","output":"2","cache_write":"1.25","cache_write_1h":"1.25","reasoning":"2","cache_read":"1","source":"b","read_on":"2026-12-04","note":"n"}]}`)
	if a.Version() != bb.Version() {
		t.Fatal("two files with the same prices have different versions")
	}
	changed := strings.Replace(string(DefaultFile()), `"output": "25.00"`, `"output": "25.01"`, 1)
	if mustParse(t, changed).Version() == want {
		t.Fatal("a changed price kept the version")
	}
}

// TestMerge: a user's file adds entries and overrides those with the
// same provider, model, tier and date; neither input changes.
func TestMerge(t *testing.T) {
	base := Default()
	baseVersion := base.Version()
	over := mustParse(t, `{"entries":[
		{"provider":"anthropic","model":"claude-opus-5","effective_from":"2026-07-24","input":"4","output":"20","source":"https://example.test/contract","read_on":"2026-12-04"},
		{"provider":"mistral","model":"mistral-large","effective_from":"2026-01-01","input":"2","output":"6","source":"https://example.test/mistral","read_on":"2026-12-04"}]}`)
	m := base.Merge(over)
	if m.Len() != base.Len()+1 {
		t.Fatalf("merged %d entries, want %d (one override, one addition)", m.Len(), base.Len()+1)
	}
	u := events.Usage{InputTokens: 1_000_000}
	got, ok := m.Price(Attempt{Provider: "anthropic", Model: "claude-opus-5", At: day("2026-08-01"), Usage: u})
	if !ok || got.Total != 4_000_000_000 {
		t.Fatalf("overridden entry: %d, %v; want 4,000,000,000", got.Total, ok)
	}
	if _, ok := m.Price(Attempt{Provider: "mistral", Model: "mistral-large-2411", At: day("2026-08-01"), Usage: u}); !ok {
		t.Fatal("added entry not found")
	}
	if got, _ := base.Price(Attempt{Provider: "anthropic", Model: "claude-opus-5", At: day("2026-08-01"), Usage: u}); got.Total != 5_000_000_000 {
		t.Fatalf("Merge changed the base catalog: %d", got.Total)
	}
	if base.Version() != baseVersion || m.Version() == baseVersion {
		t.Fatal("versions: the base changed, or the merge kept the base's")
	}
	if base.Merge(nil) != base || base.Merge(mustParse(t, `{"entries":[]}`)) != base {
		t.Fatal("merging nothing made a new catalog")
	}
}

// TestCatalogConcurrent: a catalog is read by many goroutines at once
// (go test -race).
func TestCatalogConcurrent(t *testing.T) {
	c := Default()
	done := make(chan struct{})
	for g := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 500 {
				c.Price(Attempt{Provider: "anthropic", Model: "claude-opus-5", At: day("2026-08-01").Add(time.Duration(g*i) * time.Hour),
					Usage: events.Usage{InputTokens: int64(i), OutputTokens: int64(g)}})
				_ = c.Version()
			}
		}()
	}
	for range 4 {
		<-done
	}
}

// tieredFile is a small file of Gemini's shape (one long-context tier), a
// seed for FuzzParse.
const tieredFile = `{"entries":[{"provider":"gemini","model":"gemini-2.5-pro","effective_from":"2026-06-02",
	"input":"1.25","output":"10","cache_read":"0.125",
	"tiers":[{"above_input_tokens":200000,"input":"2.50","output":"15","cache_read":"0.25"}],
	"source":"https://ai.google.dev/gemini-api/docs/pricing","read_on":"2026-12-04"}]}`

func FuzzParse(f *testing.F) {
	// Seeds are small: the fuzzer minimises every new input it finds, and
	// minimising a mutated copy of the 20 KB default file stalls it.
	f.Add([]byte(tieredFile))
	f.Add([]byte(reasoningFile))
	f.Add([]byte(`{"entries":[{"provider":"p","model":"m","effective_from":"2026-01-01","input":"1","output":"1","tiers":[{"above_input_tokens":1,"input":"2","output":"2"}],"source":"s","read_on":"2026-01-01"}]}`))
	f.Add([]byte(`{"entries":[{"tiers":[null,1,{}]}]}`))
	f.Add([]byte(`{"entries":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			return
		}
		// A catalog Parse accepts writes back to one of the same version
		// and prices without panicking.
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		again, err := Parse(b)
		if err != nil {
			t.Fatalf("written back, the catalog does not parse: %v\n%s", err, b)
		}
		if again.Version() != c.Version() {
			t.Fatal("written back, the catalog changed version")
		}
		for _, e := range c.Entries() {
			checkParts(t, e.Cost(events.Usage{InputTokens: 300_000, OutputTokens: 1000, CacheReadInputTokens: 100, CacheCreationInputTokens: 100, ReasoningTokens: 10}))
		}
	})
}

// BenchmarkPrice is the aggregator's hot path: one call per attempt, a
// dated model ID resolved to its family, a long-context tier, every kind
// of token. It must not allocate.
func BenchmarkPrice(b *testing.B) {
	c := Default()
	a := Attempt{Provider: "anthropic", Model: "claude-sonnet-4-5-20250929", At: day("2026-08-01"),
		Usage: events.Usage{InputTokens: 250_000, OutputTokens: 2_000, CacheReadInputTokens: 200_000,
			CacheCreationInputTokens: 30_000, CacheCreation1hInputTokens: 10_000, ReasoningTokens: 500}}
	b.ReportAllocs()
	var sink Money
	for b.Loop() {
		cost, _ := c.Price(a)
		sink += cost.Total
	}
	_ = sink
}

// TestPriceDoesNotAllocate holds BenchmarkPrice's 0 allocs/op in the
// ordinary test run.
func TestPriceDoesNotAllocate(t *testing.T) {
	c := Default()
	for _, a := range []Attempt{
		{Provider: "anthropic", Model: "claude-sonnet-4-5-20250929", At: day("2026-08-01"), Usage: events.Usage{InputTokens: 250_000, OutputTokens: 10}},
		{Provider: "openai", Model: "gpt-6-luna", ServiceTier: "flex", At: day("2026-10-01"), Usage: events.Usage{InputTokens: 5}},
		{Provider: "gemini", Model: "models/gemini-2.5-flash-preview-05-20", At: day("2026-10-01")},
	} {
		if n := testing.AllocsPerRun(100, func() { c.Price(a) }); n != 0 {
			t.Errorf("Price(%s %s) allocates %v times", a.Provider, a.Model, n)
		}
	}
}

// TestCatalogIsImmutable: what Lookup and Entries return are copies; a
// caller that changes them does not change the catalog's prices.
func TestCatalogIsImmutable(t *testing.T) {
	c := Default()
	version := c.Version()
	a := Attempt{Provider: "anthropic", Model: "claude-sonnet-4-5", At: day("2026-08-01"), Usage: events.Usage{InputTokens: 300_000}}
	before, _ := c.Price(a)
	e, ok := c.Lookup(a.Provider, a.Model, a.ServiceTier, a.At)
	if !ok || len(e.Tiers) == 0 {
		t.Fatal("no entry with a long-context tier")
	}
	e.Input, e.Tiers[0].Input = 0, 0
	for _, x := range c.Entries() {
		x.Output = 0
		for i := range x.Tiers {
			x.Tiers[i].Input = 0
		}
	}
	if after, _ := c.Price(a); after != before || c.Version() != version {
		t.Fatalf("changing returned entries changed the catalog: %+v, then %+v", before, after)
	}
}
