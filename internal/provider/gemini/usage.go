package gemini

import (
	"google.golang.org/genai"

	"github.com/agentledger/ledger/internal/events"
)

// UsageOf converts the usage metadata of a response (for a stream, the
// last chunk that has any) to the contract's; a nil response or one
// without usage metadata gives zero usage.
//
// promptTokenCount already counts the cached content
// (cachedContentTokenCount, the cache-read subset); tool-use prompt tokens
// are input counted apart from it, so they are added. Thinking tokens
// (thoughtsTokenCount) are billed as output and are added to
// candidatesTokenCount, which excludes them; they are also ReasoningTokens,
// the output's reasoning subset. So InputTokens + OutputTokens is the
// response's totalTokenCount. Gemini reports no cache-creation count:
// context caches are created by a separate call.
func UsageOf(resp *genai.GenerateContentResponse) events.Usage {
	if resp == nil {
		return events.Usage{}
	}
	return MetadataUsage(resp.UsageMetadata)
}

// MetadataUsage converts usage metadata to the contract's usage, as
// UsageOf does; nil gives zero usage.
func MetadataUsage(m *genai.GenerateContentResponseUsageMetadata) events.Usage {
	if m == nil {
		return events.Usage{}
	}
	// A negative count (which no real response has) counts as 0: the
	// usage is never negative.
	count := func(n int32) int64 { return int64(max(n, 0)) }
	return events.Usage{
		InputTokens:          count(m.PromptTokenCount) + count(m.ToolUsePromptTokenCount),
		OutputTokens:         count(m.CandidatesTokenCount) + count(m.ThoughtsTokenCount),
		CacheReadInputTokens: count(m.CachedContentTokenCount),
		ReasoningTokens:      count(m.ThoughtsTokenCount),
	}
}

// ServiceTierOf returns, in the contract's form, the service tier the
// Gemini API names in a response's usageMetadata.serviceTier ("standard",
// "flex", "priority"); "" for none or "unspecified". The SDK's
// GenerateContentResponseUsageMetadata has no such field, so only the
// wire (the gateway) reads it.
func ServiceTierOf(reported string) string {
	switch t := events.ServiceTier(reported); t {
	case "unspecified", "service_tier_unspecified":
		return ""
	default:
		return t
	}
}

// StreamUsage follows the usage of a GenerateContentStream, so that a
// stream that fails midway still yields what the last chunk reported. Each
// chunk's usage metadata is the running total of the request, so the
// latest replaces the earlier ones.
//
// The zero value is ready to use. A StreamUsage is not safe for concurrent
// use; it belongs to the goroutine ranging over the stream.
type StreamUsage struct {
	usage events.Usage
	tier  string // the wire's usageMetadata.serviceTier, contract form
}

// Observe takes one chunk into account; a nil chunk or one without usage
// metadata changes nothing.
func (s *StreamUsage) Observe(chunk *genai.GenerateContentResponse) {
	if chunk != nil && chunk.UsageMetadata != nil {
		s.usage = MetadataUsage(chunk.UsageMetadata)
	}
}

// Usage returns the usage of the latest chunk that had any.
func (s *StreamUsage) Usage() events.Usage { return s.usage }

// ServiceTier returns the service tier the chunks observed raw named
// (ObserveRaw); "" when none did.
func (s *StreamUsage) ServiceTier() string { return s.tier }

// RequestID returns the response's responseId, which identifies the
// response at Google, or "" when there is none or it does not fit the
// contract (too long, not UTF-8). The Gemini API sends no request-id
// header, and its errors carry no identifier at all.
func RequestID(resp *genai.GenerateContentResponse) string {
	if resp == nil {
		return ""
	}
	return responseIDOf(resp.ResponseID)
}
