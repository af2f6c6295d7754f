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

// A 429 with retry-after-ms is retried after the server's hint.
func ExampleClassify() {
	h := http.Header{"Retry-After-Ms": {"250"}, "X-Request-Id": {"req_7"}}
	err := &sdk.Error{StatusCode: 429, Response: &http.Response{StatusCode: 429, Header: h}}
	c, ok := openai.Classify(err, time.Now())
	fmt.Println(ok, c.Kind, c.Retryable, c.Hint, c.ProviderRequestID)
	// Output: true rate_limit true 250ms req_7
}
