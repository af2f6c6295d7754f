package anthropic

import (
	"math"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/agentledger/ledger/internal/events"
)

// UsageOf converts the usage of a message to the contract's. Anthropic's
// input_tokens excludes the tokens read from and written to the prompt
// cache, while the contract's InputTokens counts every input token, so the
// cache counts are added to it; they are also reported as its subsets.
// The 1-hour part of the cache write (cache_creation.ephemeral_1h_input_tokens)
// is CacheCreation1hInputTokens, and the thinking tokens
// (output_tokens_details.thinking_tokens, part of output_tokens) are
// ReasoningTokens.
//
// For a stream, pass the Usage of the message accumulated with
// Message.Accumulate, or use StreamUsage.
func UsageOf(u sdk.Usage) events.Usage {
	return counts{
		input: u.InputTokens, output: u.OutputTokens, cacheRead: u.CacheReadInputTokens,
		cacheCreation: u.CacheCreationInputTokens, cache1h: u.CacheCreation.Ephemeral1hInputTokens,
		cache5m: u.CacheCreation.Ephemeral5mInputTokens, thinking: u.OutputTokensDetails.ThinkingTokens,
	}.usage()
}

// ServiceTierOf returns the service tier a message's usage names
// ("standard", "priority", "batch"), "" when it names none.
func ServiceTierOf(u sdk.Usage) string { return events.ServiceTier(string(u.ServiceTier)) }

// counts are the API's counts of one message, as it reports them.
type counts struct {
	input, output, cacheRead, cacheCreation int64
	// cache1h and cache5m split the cache write by lifetime
	// (usage.cache_creation); thinking is the part of the output spent
	// thinking (usage.output_tokens_details.thinking_tokens).
	cache1h, cache5m, thinking int64
}

// usage is the contract's usage of the API's counts. A negative count
// (which no real response has) counts as 0, and the input saturates
// rather than overflows: the usage is never negative. The cache write is
// at least its two parts, and each subset at most its whole, so that the
// usage keeps the contract's rules whatever the response says.
func (c counts) usage() events.Usage {
	input, output, cacheRead := max(c.input, 0), max(c.output, 0), max(c.cacheRead, 0)
	cache1h := max(c.cache1h, 0)
	cacheCreation := max(c.cacheCreation, 0, addSat(cache1h, max(c.cache5m, 0)))
	return events.Usage{
		InputTokens:                addSat(addSat(input, cacheRead), cacheCreation),
		OutputTokens:               output,
		CacheReadInputTokens:       cacheRead,
		CacheCreationInputTokens:   cacheCreation,
		CacheCreation1hInputTokens: cache1h,
		ReasoningTokens:            min(max(c.thinking, 0), output),
	}
}

// addSat is a + b for non-negative a and b, at most math.MaxInt64.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// StreamUsage follows the usage a message stream reports, so that a stream
// that fails midway still yields what was billed: message_start carries
// the input (and cache) counts and the service tier, each message_delta
// the cumulative output count (with its thinking part) and, when present,
// updated input counts. Feed it every event the stream yields, before or
// after anything else the caller does with it; Usage then returns the
// usage so far, whether or not the stream ended.
//
// The zero value is ready to use. A StreamUsage is not safe for concurrent
// use; it belongs to the goroutine reading the stream.
type StreamUsage struct {
	c    counts
	tier string
}

// Observe takes one event of the stream into account. Events other than
// message_start and message_delta do not change the usage.
func (s *StreamUsage) Observe(ev sdk.MessageStreamEventUnion) {
	switch ev.Type {
	case "message_start":
		u := ev.Message.Usage
		s.c = counts{
			input: u.InputTokens, output: u.OutputTokens, cacheRead: u.CacheReadInputTokens,
			cacheCreation: u.CacheCreationInputTokens, cache1h: u.CacheCreation.Ephemeral1hInputTokens,
			cache5m: u.CacheCreation.Ephemeral5mInputTokens, thinking: u.OutputTokensDetails.ThinkingTokens,
		}
		s.tier = string(u.ServiceTier)
	case "message_delta":
		u := ev.Usage
		s.c.output = u.OutputTokens
		// The counts a delta omits keep message_start's value.
		for _, f := range []struct {
			valid    bool
			dst      *int64
			reported int64
		}{
			{u.JSON.InputTokens.Valid(), &s.c.input, u.InputTokens},
			{u.JSON.CacheReadInputTokens.Valid(), &s.c.cacheRead, u.CacheReadInputTokens},
			{u.JSON.CacheCreationInputTokens.Valid(), &s.c.cacheCreation, u.CacheCreationInputTokens},
			{u.OutputTokensDetails.JSON.ThinkingTokens.Valid(), &s.c.thinking, u.OutputTokensDetails.ThinkingTokens},
		} {
			if f.valid {
				*f.dst = f.reported
			}
		}
	}
}

// Usage returns the usage observed so far, in the contract's terms (see
// UsageOf).
func (s *StreamUsage) Usage() events.Usage { return s.c.usage() }

// ServiceTier returns the service tier message_start named, "" before it
// or when it named none.
func (s *StreamUsage) ServiceTier() string { return events.ServiceTier(s.tier) }
