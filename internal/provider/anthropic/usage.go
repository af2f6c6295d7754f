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
//
// For a stream, pass the Usage of the message accumulated with
// Message.Accumulate, or use StreamUsage.
func UsageOf(u sdk.Usage) events.Usage {
	return usage(u.InputTokens, u.OutputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens)
}

// usage is the contract's usage of the API's counts. A negative count
// (which no real response has) counts as 0, and the input saturates
// rather than overflows: the usage is never negative.
func usage(input, output, cacheRead, cacheCreation int64) events.Usage {
	input, output, cacheRead, cacheCreation = max(input, 0), max(output, 0), max(cacheRead, 0), max(cacheCreation, 0)
	return events.Usage{
		InputTokens:              addSat(addSat(input, cacheRead), cacheCreation),
		OutputTokens:             output,
		CacheReadInputTokens:     cacheRead,
		CacheCreationInputTokens: cacheCreation,
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
// the input (and cache) counts, each message_delta the cumulative output
// count and, when present, updated input counts. Feed it every event the
// stream yields, before or after anything else the caller does with it;
// Usage then returns the usage so far, whether or not the stream ended.
//
// The zero value is ready to use. A StreamUsage is not safe for concurrent
// use; it belongs to the goroutine reading the stream.
type StreamUsage struct {
	input, output, cacheRead, cacheCreation int64
}

// Observe takes one event of the stream into account. Events other than
// message_start and message_delta do not change the usage.
func (s *StreamUsage) Observe(ev sdk.MessageStreamEventUnion) {
	switch ev.Type {
	case "message_start":
		u := ev.Message.Usage
		s.input, s.output, s.cacheRead, s.cacheCreation = u.InputTokens, u.OutputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens
	case "message_delta":
		u := ev.Usage
		s.output = u.OutputTokens
		// The counts a delta omits keep message_start's value.
		if u.JSON.InputTokens.Valid() {
			s.input = u.InputTokens
		}
		if u.JSON.CacheReadInputTokens.Valid() {
			s.cacheRead = u.CacheReadInputTokens
		}
		if u.JSON.CacheCreationInputTokens.Valid() {
			s.cacheCreation = u.CacheCreationInputTokens
		}
	}
}

// Usage returns the usage observed so far, in the contract's terms (see
// UsageOf).
func (s *StreamUsage) Usage() events.Usage {
	return usage(s.input, s.output, s.cacheRead, s.cacheCreation)
}
