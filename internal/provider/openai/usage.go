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
// Reasoning tokens are part of completion_tokens.
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
	})
}

// ResponseUsageOf converts the usage of a Responses API response to the
// contract's. As with chat completions, input_tokens counts the cached
// tokens (input_tokens_details.cached_tokens) and the tokens written to
// the cache (cache_write_tokens); reasoning tokens are part of
// output_tokens.
func ResponseUsageOf(u responses.ResponseUsage) events.Usage {
	return nonNegative(events.Usage{
		InputTokens:              u.InputTokens,
		OutputTokens:             u.OutputTokens,
		CacheReadInputTokens:     u.InputTokensDetails.CachedTokens,
		CacheCreationInputTokens: u.InputTokensDetails.CacheWriteTokens,
	})
}

// nonNegative makes a negative count (which no real response has) 0: the
// usage is never negative.
func nonNegative(u events.Usage) events.Usage {
	return events.Usage{
		InputTokens:              max(u.InputTokens, 0),
		OutputTokens:             max(u.OutputTokens, 0),
		CacheReadInputTokens:     max(u.CacheReadInputTokens, 0),
		CacheCreationInputTokens: max(u.CacheCreationInputTokens, 0),
	}
}
