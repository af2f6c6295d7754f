package gemini_test

import (
	"fmt"
	"time"

	"google.golang.org/genai"

	"github.com/agentledger/ledger/provider/gemini"
)

// Thinking tokens are billed as output; promptTokenCount already counts
// the cached content.
func ExampleUsageOf() {
	resp := &genai.GenerateContentResponse{UsageMetadata: &genai.GenerateContentResponseUsageMetadata{
		PromptTokenCount: 500, CandidatesTokenCount: 1000, ThoughtsTokenCount: 200, CachedContentTokenCount: 100,
	}}
	u := gemini.UsageOf(resp)
	fmt.Printf("in %d (cache read %d), out %d\n", u.InputTokens, u.CacheReadInputTokens, u.OutputTokens)
	// Output: in 500 (cache read 100), out 1200
}

// Every request under the middleware turns automatic continuation off,
// and the client its HTTP retries.
func ExampleGenerateContentConfig() {
	cfg := gemini.GenerateContentConfig(&genai.GenerateContentConfig{MaxOutputTokens: 256})
	cc := gemini.ClientConfig(&genai.ClientConfig{APIKey: "key"})
	fmt.Println(*cfg.AutomaticContinuation, cfg.MaxOutputTokens, *cc.HTTPOptions.RetryOptions.Attempts)
	// Output: false 256 1
}

// A 503 is retried.
func ExampleClassify() {
	c, ok := gemini.Classify(genai.APIError{Code: 503, Status: "UNAVAILABLE", Message: "The model is overloaded."}, fmtTime)
	fmt.Println(ok, c.Kind, c.Retryable)
	// Output: true overloaded true
}

var fmtTime = time.Now()
