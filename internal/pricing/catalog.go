package pricing

import (
	"slices"
	"strings"
	"time"

	"github.com/agentledger/ledger/internal/events"
)

// The service tiers a catalog entry may name. The standard tier is the
// empty string.
const (
	TierStandard = ""
	TierBatch    = "batch"
	TierFlex     = "flex"
	TierPriority = "priority"
)

// Rates are the prices of one entry or one long-context tier, every one
// resolved: a rate the file leaves out is stored as the rate it defaults
// to, so that two files that price alike are alike (see Version).
type Rates struct {
	Input     Rate // uncached input tokens
	Output    Rate // output tokens other than reasoning
	CacheRead Rate // cache-read input tokens (file default: Input)
	// CacheWrite is the 5-minute cache write, or the only cache write of
	// a provider that does not split it (file default: Input).
	CacheWrite Rate
	// CacheWrite1h is the 1-hour cache write (file default: CacheWrite).
	CacheWrite1h Rate
	// Reasoning is the rate of reasoning (thinking) output tokens where
	// the provider prices them apart; elsewhere reasoning tokens are
	// output tokens and this is the output rate (file default: Output).
	Reasoning Rate
}

// Tier is a long-context tier: when a request's input tokens (cached
// ones included: the contract's input_tokens) are above AboveInputTokens,
// the WHOLE request is priced at the tier's rates, as Anthropic and
// Google do.
type Tier struct {
	AboveInputTokens int64
	Rates
}

// Entry is one dated price of one model family of one provider at one
// service tier. A price change is a new Entry with a later
// EffectiveFrom, never an edit of an old one.
type Entry struct {
	Provider    string // lower case: "anthropic", "openai", "gemini", a preset's name
	Model       string // lower case: a family ("claude-sonnet-4-5") or an exact model ID
	ServiceTier string // TierStandard, TierBatch, TierFlex or TierPriority
	// EffectiveFrom is the first day (00:00 UTC) the price applies to.
	EffectiveFrom time.Time
	Rates
	Tiers  []Tier // ascending AboveInputTokens
	Source string // where the price was read (a URL)
	ReadOn time.Time
	Note   string // free text: how the price was read or derived
}

// key finds an entry's prices.
type key struct{ provider, model, tier string }

// Catalog is a set of dated price entries. It is immutable once built and
// safe for concurrent use.
type Catalog struct {
	entries []Entry         // canonical order: provider, model, tier, effective_from
	index   map[key][]int32 // indexes into entries, ascending EffectiveFrom
	version string
	// exact is whether some entry is keyed by a model ID that is not its
	// own family (a dated snapshot priced apart); without one, a dated ID
	// can only match its family's entry and Price looks up once.
	exact bool
}

// Attempt is what Price needs of one attempt.
type Attempt struct {
	Provider, Model, ServiceTier string
	At                           time.Time // when the attempt started; picks the dated entry
	Usage                        events.Usage
}

// Cost is the price of one attempt, in Money. Total is rounded once from
// the exact sum; the parts are the differences of the rounded running sum
// (Input, CacheRead, CacheWrite, Output, Reasoning, in that order), so
// they add up to Total exactly and each is within 1 nano-USD of its
// exact value.
type Cost struct {
	Total                                           Money
	Input, Output, CacheRead, CacheWrite, Reasoning Money
}

// newCatalog sorts entries into canonical order and indexes them. The
// caller has checked that no two share a key and an effective date.
func newCatalog(entries []Entry) *Catalog {
	slices.SortFunc(entries, compareEntries)
	c := &Catalog{entries: entries, index: make(map[key][]int32)}
	for i, e := range entries {
		k := key{e.Provider, e.Model, e.ServiceTier}
		c.index[k] = append(c.index[k], int32(i))
		c.exact = c.exact || Family(e.Provider, e.Model) != e.Model
	}
	c.version = digest(entries)
	return c
}

func compareEntries(a, b Entry) int {
	if c := strings.Compare(a.Provider, b.Provider); c != 0 {
		return c
	}
	if c := strings.Compare(a.Model, b.Model); c != 0 {
		return c
	}
	if c := strings.Compare(a.ServiceTier, b.ServiceTier); c != 0 {
		return c
	}
	return a.EffectiveFrom.Compare(b.EffectiveFrom)
}

// Entries returns a copy of the catalog's entries in canonical order
// (provider, model, service tier, effective date).
func (c *Catalog) Entries() []Entry {
	out := make([]Entry, len(c.entries))
	for i, e := range c.entries {
		e.Tiers = slices.Clone(e.Tiers)
		out[i] = e
	}
	return out
}

// Len is the number of entries.
func (c *Catalog) Len() int { return len(c.entries) }

// Version is a digest of the catalog's prices: the SHA-256, in hex, of
// its entries in canonical order with every rate resolved. Two catalogs
// that price every attempt alike have the same version, whatever the
// order of their files; sources and reading dates are not prices and do
// not change it.
func (c *Catalog) Version() string { return c.version }

// Merge returns a catalog with the entries of c and over; an entry of
// over replaces the one of c with the same provider, model, service tier
// and effective date. Neither c nor over changes. A nil over returns c.
func (c *Catalog) Merge(over *Catalog) *Catalog {
	if over == nil || len(over.entries) == 0 {
		return c
	}
	if c == nil {
		return over
	}
	entries := make([]Entry, 0, len(c.entries)+len(over.entries))
	entries = append(entries, over.entries...)
	for _, e := range c.entries {
		if _, found := over.find(e.Provider, e.Model, e.ServiceTier, e.EffectiveFrom); !found {
			entries = append(entries, e)
		}
	}
	return newCatalog(entries)
}

// find returns the entry with exactly this key and date.
func (c *Catalog) find(provider, model, tier string, from time.Time) (*Entry, bool) {
	for _, i := range c.index[key{provider, model, tier}] {
		if c.entries[i].EffectiveFrom.Equal(from) {
			return &c.entries[i], true
		}
	}
	return nil, false
}

// Lookup returns a copy of the entry that prices an attempt of this
// provider, model and service tier at time at: the one of its exact model
// if the catalog has one effective at at, else the one of its family (see
// Family); of those, the latest effective at at. The provider, model and
// tier are compared in lower case; the tier names "standard", "default"
// and "auto" are the standard tier.
func (c *Catalog) Lookup(provider, model, serviceTier string, at time.Time) (Entry, bool) {
	e, ok := c.lookup(provider, model, serviceTier, at)
	if !ok {
		return Entry{}, false
	}
	out := *e
	out.Tiers = slices.Clone(e.Tiers)
	return out, true
}

// lookup is Lookup without the copy: the entry stays the catalog's.
func (c *Catalog) lookup(provider, model, serviceTier string, at time.Time) (*Entry, bool) {
	if c == nil {
		return nil, false
	}
	provider, model = strings.ToLower(provider), strings.ToLower(model)
	tier := normalTier(serviceTier)
	fam := Family(provider, model)
	if fam != model && c.exact {
		if e, ok := c.latest(key{provider, model, tier}, at); ok {
			return e, true
		}
	}
	return c.latest(key{provider, fam, tier}, at)
}

func (c *Catalog) latest(k key, at time.Time) (*Entry, bool) {
	idx := c.index[k]
	for j := len(idx) - 1; j >= 0; j-- {
		if e := &c.entries[idx[j]]; !e.EffectiveFrom.After(at) {
			return e, true
		}
	}
	return nil, false
}

// normalTier maps the service tier a provider reports to the catalog's
// names: Anthropic's "standard" and OpenAI's "default" (and "auto", a
// request's wish rather than a tier) are the standard tier "".
func normalTier(t string) string {
	switch t = strings.ToLower(t); t {
	case "standard", "default", "auto":
		return TierStandard
	}
	return t
}

// Price returns the cost of one attempt at the prices of the entry
// Lookup finds; false when there is none (the attempt's tokens are then
// unpriced, never $0).
//
// Each token is priced once:
//   - uncached input = InputTokens - CacheRead - CacheCreation (the
//     contract's input_tokens includes both), at Input;
//   - cache reads at CacheRead, never at Input;
//   - cache creation at CacheWrite, its 1-hour part at CacheWrite1h;
//   - output other than reasoning at Output, reasoning at Reasoning
//     (the output rate where the provider does not price it apart).
//
// When InputTokens is above a long-context tier's threshold the whole
// request is priced at that tier's rates. Every product tokens x Rate
// (1e-15 USD) is exact in 128 bits; the sum is rounded once, half to
// even, to Money. Negative counts (which the contract refuses) count as
// 0, so a cost is never negative.
func (c *Catalog) Price(a Attempt) (Cost, bool) {
	e, ok := c.lookup(a.Provider, a.Model, a.ServiceTier, a.At)
	if !ok {
		return Cost{}, false
	}
	return e.Cost(a.Usage), true
}

// Cost prices usage at the entry's rates (see Price).
func (e *Entry) Cost(u events.Usage) Cost {
	r := e.RatesFor(u.InputTokens)
	read := max(u.CacheReadInputTokens, 0)
	create := max(u.CacheCreationInputTokens, 0)
	create1h := min(max(cacheWrite1hTokens(u), 0), create)
	uncached := max(u.InputTokens-read-create, 0)
	out := max(u.OutputTokens, 0)
	reasoning := min(max(reasoningTokens(u), 0), out)

	// The running sum, in the order of the parts of Cost.
	s1 := mulTokens(uncached, r.Input)
	s2 := s1.add(mulTokens(read, r.CacheRead))
	s3 := s2.add(mulTokens(create-create1h, r.CacheWrite)).add(mulTokens(create1h, r.CacheWrite1h))
	s4 := s3.add(mulTokens(out-reasoning, r.Output))
	s5 := s4.add(mulTokens(reasoning, r.Reasoning))
	m1, m2, m3, m4, m5 := s1.toMoney(), s2.toMoney(), s3.toMoney(), s4.toMoney(), s5.toMoney()
	return Cost{
		Total:      m5,
		Input:      m1,
		CacheRead:  m2 - m1,
		CacheWrite: m3 - m2,
		Output:     m4 - m3,
		Reasoning:  m5 - m4,
	}
}

// RatesFor returns the rates of a request with inputTokens input tokens
// (cached ones included): the highest long-context tier it is above, or
// the entry's own rates.
func (e *Entry) RatesFor(inputTokens int64) Rates {
	for i := len(e.Tiers) - 1; i >= 0; i-- {
		if inputTokens > e.Tiers[i].AboveInputTokens {
			return e.Tiers[i].Rates
		}
	}
	return e.Rates
}

// reasoningTokens is the part of the output tokens that is reasoning
// (thinking): the contract's usage.reasoning_tokens, a subset of
// output_tokens. Where a provider does not price it apart the entry's
// Reasoning rate is its Output rate, so reasoning tokens are output tokens.
func reasoningTokens(u events.Usage) int64 { return u.ReasoningTokens }

// cacheWrite1hTokens is the part of the cache creation tokens written
// with a 1-hour lifetime (Anthropic's ephemeral_1h_input_tokens): the
// contract's usage.cache_creation_1h_input_tokens.
func cacheWrite1hTokens(u events.Usage) int64 { return u.CacheCreation1hInputTokens }
