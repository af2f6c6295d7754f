package openai

import (
	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentledger/ledger/internal/events"
)

// UsageOf converts the usage of a chat completion (or of the last chunk of
// a stream made with stream_options.include_usage) to the contract's.
// prompt_tokens already counts the cached prompt tokens, so it is the
// contract's InputTokens as it is; prompt_tokens_details.cached_tokens is
// the cache-read subset and cache_write_tokens the cache-creation subset.
// Reasoning tokens are part of completion_tokens: their count
// (completion_tokens_details.reasoning_tokens) is ReasoningTokens.
//
// A chat completion stream reports usage only in its last chunk; follow
// a stream with StreamUsage, which still reports the output streamed when
// that chunk never comes.
func UsageOf(u sdk.CompletionUsage) events.Usage {
	return nonNegative(events.Usage{
		InputTokens:              u.PromptTokens,
		OutputTokens:             u.CompletionTokens,
		CacheReadInputTokens:     u.PromptTokensDetails.CachedTokens,
		CacheCreationInputTokens: u.PromptTokensDetails.CacheWriteTokens,
		ReasoningTokens:          u.CompletionTokensDetails.ReasoningTokens,
	})
}

// ResponseUsageOf converts the usage of a Responses API response to the
// contract's. As with chat completions, input_tokens counts the cached
// tokens (input_tokens_details.cached_tokens) and the tokens written to
// the cache (cache_write_tokens); reasoning tokens are part of
// output_tokens (output_tokens_details.reasoning_tokens is
// ReasoningTokens).
func ResponseUsageOf(u responses.ResponseUsage) events.Usage {
	return nonNegative(events.Usage{
		InputTokens:              u.InputTokens,
		OutputTokens:             u.OutputTokens,
		CacheReadInputTokens:     u.InputTokensDetails.CachedTokens,
		CacheCreationInputTokens: u.InputTokensDetails.CacheWriteTokens,
		ReasoningTokens:          u.OutputTokensDetails.ReasoningTokens,
	})
}

// nonNegative makes a negative count (which no real response has) 0, and
// the reasoning at most the output: the usage is never negative and keeps
// the contract's subset rule.
func nonNegative(u events.Usage) events.Usage {
	out := max(u.OutputTokens, 0)
	return events.Usage{
		InputTokens:              max(u.InputTokens, 0),
		OutputTokens:             out,
		CacheReadInputTokens:     max(u.CacheReadInputTokens, 0),
		CacheCreationInputTokens: max(u.CacheCreationInputTokens, 0),
		ReasoningTokens:          min(max(u.ReasoningTokens, 0), out),
	}
}

// ServiceTierOf returns, in the contract's form, the service tier a chat
// completion, a chunk or a response names (its service_tier): "standard"
// for OpenAI's "default", "flex", "scale", "priority"...; "" when it names
// none, or only "auto" (what a request asks, not the tier that served it).
func ServiceTierOf[T ~string](tier T) string {
	switch t := events.ServiceTier(string(tier)); t {
	case "default":
		return "standard"
	case "auto":
		return ""
	default:
		return t
	}
}
