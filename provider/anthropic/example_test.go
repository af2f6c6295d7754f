package anthropic_test

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/agentledger/ledger/provider/anthropic"
)

// The ledger's input counts every input token: Anthropic's input_tokens
// plus the tokens read from and written to the prompt cache.
func ExampleUsageOf() {
	u := anthropic.UsageOf(sdk.Usage{InputTokens: 100, OutputTokens: 1200, CacheReadInputTokens: 400})
	fmt.Printf("in %d (cache read %d), out %d\n", u.InputTokens, u.CacheReadInputTokens, u.OutputTokens)
	// Output: in 500 (cache read 400), out 1200
}

// The 1-hour cache write and the thinking tokens are subsets; the tier
// goes into the Report beside the usage.
func ExampleServiceTierOf() {
	var msg sdk.Message
	if err := msg.UnmarshalJSON([]byte(`{"usage":{"input_tokens":10,"output_tokens":300,"cache_creation_input_tokens":500,` +
		`"cache_creation":{"ephemeral_5m_input_tokens":100,"ephemeral_1h_input_tokens":400},"output_tokens_details":{"thinking_tokens":200},"service_tier":"priority"}}`)); err != nil {
		panic(err)
	}
	u := anthropic.UsageOf(msg.Usage)
	fmt.Printf("in %d (1h write %d), out %d (thinking %d), tier %s\n",
		u.InputTokens, u.CacheCreation1hInputTokens, u.OutputTokens, u.ReasoningTokens, anthropic.ServiceTierOf(msg.Usage))
	// Output: in 510 (1h write 400), out 300 (thinking 200), tier priority
}

// An overloaded API (529) is retried; an error that is not the SDK's is
// left to the middleware's transport rules.
func ExampleClassify() {
	overloaded := &sdk.Error{StatusCode: 529, RequestID: "req_1", Response: &http.Response{StatusCode: 529, Header: http.Header{}}}
	c, ok := anthropic.Classify(fmt.Errorf("calling claude: %w", overloaded), time.Now())
	fmt.Println(ok, c.Kind, c.Status, c.Retryable, c.ProviderRequestID)
	_, ok = anthropic.Classify(errors.New("connection reset by peer"), time.Now())
	fmt.Println(ok)
	// Output:
	// true overloaded 529 true req_1
	// false
}

// A stream that reported its input and then failed still yields what was
// billed.
func ExampleStreamUsage() {
	var su anthropic.StreamUsage
	var start sdk.MessageStreamEventUnion
	if err := start.UnmarshalJSON([]byte(`{"type":"message_start","message":{"usage":{"input_tokens":500,"output_tokens":1}}}`)); err != nil {
		panic(err)
	}
	su.Observe(start)
	fmt.Printf("billed in %d, out %d\n", su.Usage().InputTokens, su.Usage().OutputTokens)
	// Output: billed in 500, out 1
}

// Every client used under the middleware is built with ClientOptions, so
// that the SDK does not retry on its own and a stream reports its progress
// to the middleware (its idle timeout).
func ExampleClientOptions() {
	client := sdk.NewClient(anthropic.ClientOptions()...)
	_ = client
	fmt.Println(len(anthropic.ClientOptions()), "options: max retries 0, stream progress")
	// Output: 2 options: max retries 0, stream progress
}
