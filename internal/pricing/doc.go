// Package pricing owns the price catalog and the arithmetic of money: what
// one attempt cost, in exact integers.
//
// # Catalog
//
// A Catalog is a set of dated entries, one per provider, model family (or
// exact model ID) and service tier ("" standard, "batch", "flex",
// "priority") and effective date. A price change is a new entry with a
// later EffectiveFrom, never an edit: Price picks, for the attempt's
// time, the latest entry effective at it, so the past keeps its prices
// and a rebuild re-prices history the same way. Each entry carries the
// rates for input, output, cache read, cache write (5 minutes and 1 hour
// where the provider splits them, else one), reasoning output where the
// provider prices it apart (elsewhere reasoning tokens are output tokens
// at the output rate), long-context tiers (above N input tokens the whole
// request is priced at the tier's rates, as Anthropic and Google do), and
// its Source and the date it was read.
//
// Lookup (and so Price) compares provider, model and tier in lower case,
// tries the attempt's exact model first and then its Family (a dated ID's
// family: claude-sonnet-4-5-20250929 -> claude-sonnet-4-5); the tiers
// "standard", "default" and "auto" are the standard tier. An
// OpenAI-compatible preset is priced under its preset name as the provider
// ("mistral", "groq", ...). No entry is no price (false), never $0.
//
// Default is the catalog shipped in catalog.json (embedded; each entry
// names its source and the day it was read, and carries only prices the
// provider's own pages state: where the live page could not be fetched,
// a verbatim copy of it was read and the entry's note names the copy and
// its date; a rate derived from a multiplier the page states says so in
// the note; docs/pricing.md lists the sources and what is left out);
// Parse reads a user's file in the same
// format, with every rule checked and each error naming the entry, the
// field and the rule; Merge lays one catalog over another; MarshalJSON
// writes a catalog back as a canonical file; Version is a digest of the
// prices, independent of the file's order, its sources and its notes.
// A rate a file leaves out is resolved when parsed (cache read and cache
// write default to input, the 1-hour write to the 5-minute one, reasoning
// to output), so two files that price alike have one version.
//
// # Money
//
// Money is int64 nano-US-dollars (1e-9 USD); Rate is int64 nano-US-dollars
// per million tokens, which is 1e-15 USD per token, so that any price
// quoted to 1e-9 $/Mtok is exact. Prices are read from decimal strings
// without a float anywhere. tokens x Rate is an amount in 1e-15 USD,
// computed exactly in 128 bits (math/bits); the parts of an attempt are
// summed in 128 bits and the sum is rounded ONCE, half to even, to Money.
// The parts of a Cost are the differences of the rounded running sum, so
// they add up to Total exactly. Floats would make the ledger's sums depend
// on the order of addition and drift in the last digits; integers make a
// session's cost the exact sum of its attempts' costs, in any order, and
// a rebuild reproduce it to the nano-dollar. The rule is written in
// docs/contract.md ("Money").
//
// # Tokens
//
// Usage follows the wire contract: InputTokens includes the cache reads
// and the cache creation, so the uncached input is InputTokens -
// CacheRead - CacheCreation. Each token is priced once: cache reads at
// the cache-read rate (never as input), cache creation at the cache-write
// rate (never also as input).
package pricing
