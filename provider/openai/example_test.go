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
