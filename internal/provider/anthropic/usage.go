package anthropic

import (
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

func usage(input, output, cacheRead, cacheCreation int64) events.Usage {
	return events.Usage{
		InputTokens:              input + cacheRead + cacheCreation,
		OutputTokens:             output,
		CacheReadInputTokens:     cacheRead,
		CacheCreationInputTokens: cacheCreation,
	}
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
