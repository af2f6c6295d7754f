package ledgertest_test

import (
	"context"
	"fmt"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentledger/ledger"
	"github.com/agentledger/ledger/gateway"
	"github.com/agentledger/ledger/ledgertest"
	"github.com/agentledger/ledger/provider/openai"
)

// An OpenAI client through a gateway in the test: the scripted fake
// answers the first attempt 500, the gateway retries, and the ledger
// records one call of two attempts.
func ExampleStartGateway() {
	t := &tb{} // in a test: the test's t
	defer t.close()

	l := ledgertest.Start(t)
	up := ledgertest.FakeOpenAI(t, ledgertest.ServerError(), ledgertest.Succeed(ledger.Usage{InputTokens: 300, OutputTokens: 40}))
	gw := ledgertest.StartGateway(t, l, ledgertest.GatewayUpstream(up), gateway.WithRetryPolicy(quick))

	client := sdk.NewClient(append([]option.RequestOption{option.WithBaseURL(gw.URL() + "/v1"), option.WithAPIKey("test"),
		option.WithHeader("X-Ledger-Session-Id", "sess-1"), option.WithHeader("X-Ledger-Request-Id", "req-1")}, openai.ClientOptions()...)...)
	_, err := client.Chat.Completions.New(context.Background(), sdk.ChatCompletionNewParams{
		Model: "gpt-4.1-mini", Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("hello")},
	})
	if err != nil {
		panic(err)
	}
	r := l.WaitRequest(t, "req-1")
	fmt.Println("upstream requests:", up.Requests())
	fmt.Println("attempts:", r.Attempts, "status:", r.Status)
	fmt.Println("usage in/out:", r.Usage.InputTokens, r.Usage.OutputTokens)
	// Output:
	// upstream requests: 2
	// attempts: 2 status: succeeded
	// usage in/out: 300 40
}
