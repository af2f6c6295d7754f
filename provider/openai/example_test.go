package openai_test

import (
	"fmt"
	"net/http"
	"time"

	sdk "github.com/openai/openai-go/v3"

	"github.com/agentledger/ledger/provider/openai"
)

// prompt_tokens already counts the cached tokens: it is the ledger's input
// as it is, and cached_tokens its cache-read subset.
func ExampleUsageOf() {
	var u sdk.CompletionUsage
	u.PromptTokens, u.CompletionTokens = 500, 1200
	u.PromptTokensDetails.CachedTokens = 128
	got := openai.UsageOf(u)
	fmt.Printf("in %d (cache read %d), out %d\n", got.InputTokens, got.CacheReadInputTokens, got.OutputTokens)
	// Output: in 500 (cache read 128), out 1200
}

// The reasoning tokens are a subset of the output; OpenAI's "default" tier
// is recorded as "standard".
func ExampleServiceTierOf() {
	var cc sdk.ChatCompletion
	if err := cc.UnmarshalJSON([]byte(`{"service_tier":"default","usage":{"prompt_tokens":40,"completion_tokens":900,` +
		`"completion_tokens_details":{"reasoning_tokens":768}}}`)); err != nil {
		panic(err)
	}
	u := openai.UsageOf(cc.Usage)
	fmt.Printf("out %d (reasoning %d), tier %s\n", u.OutputTokens, u.ReasoningTokens, openai.ServiceTierOf(cc.ServiceTier))
	// Output: out 900 (reasoning 768), tier standard
}

// A 429 with retry-after-ms is retried after the server's hint.
func ExampleClassify() {
	h := http.Header{"Retry-After-Ms": {"250"}, "X-Request-Id": {"req_7"}}
	err := &sdk.Error{StatusCode: 429, Response: &http.Response{StatusCode: 429, Header: h}}
	c, ok := openai.Classify(err, time.Now())
	fmt.Println(ok, c.Kind, c.Retryable, c.Hint, c.ProviderRequestID)
	// Output: true rate_limit true 250ms req_7
}

// The input of a chat request, as the model family's tokenizer counts it
// with OpenAI's per-message overheads: 3 for the message, 1 for "user",
// 1 for "hello", 3 for the reply.
func ExampleEstimateInput() {
	e, err := openai.EstimateInput(sdk.ChatCompletionNewParams{
		Model:    "gpt-4o",
		Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("hello")},
	})
	fmt.Println(e.Tokens, e.Encoding, e.Partial, err)
	// Output: 8 o200k_base false <nil>
}

// A stream cut before its usage chunk: Report carries the output
// streamed in Usage, and the input estimated from the request apart, in
// EstimatedInputTokens, which the ledger records as estimated.
func ExampleNewStreamUsage() {
	params := sdk.ChatCompletionNewParams{
		Model:    "gpt-4o",
		Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("hello")},
	}
	usage := openai.NewStreamUsage(params)
	var chunk sdk.ChatCompletionChunk
	_ = chunk.UnmarshalJSON([]byte(`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hi"}}]}`))
	usage.Observe(chunk) // ... and the stream breaks
	r := usage.Report()
	fmt.Println(usage.Complete(), r.Usage.InputTokens, r.Usage.OutputTokens, r.EstimatedInputTokens)
	// Output: false 0 1 8
}
