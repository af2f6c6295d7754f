package ledgertest_test

import (
	"testing"

	asdk "github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	osdk "github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger"
	"github.com/agentledger/ledger/gateway"
	"github.com/agentledger/ledger/ledgertest"
	"github.com/agentledger/ledger/provider/anthropic"
	"github.com/agentledger/ledger/provider/openai"
)

// An OpenAI client that knows nothing of the ledger but its base URL and
// two headers, through a gateway in the test: the scripted fake answers
// the first attempt 500, which the gateway retries. The ledger has one
// logical call of two attempts; a plain 500 bills nothing, so billed is
// the winning attempt's usage.
func TestGatewayRetriesAServerError(t *testing.T) {
	l := ledgertest.Start(t)
	up := ledgertest.FakeOpenAI(t, ledgertest.ServerError(), ledgertest.Succeed(ledger.Usage{InputTokens: 300, OutputTokens: 40}))
	gw := ledgertest.StartGateway(t, l, ledgertest.GatewayUpstream(up), gateway.WithRetryPolicy(quick))

	client := osdk.NewClient(append([]ooption.RequestOption{ooption.WithBaseURL(gw.URL() + "/v1"), ooption.WithAPIKey("test"),
		ooption.WithHeader("X-Ledger-Session-Id", "sess-gw"), ooption.WithHeader("X-Ledger-Request-Id", "req-gw")}, openai.ClientOptions()...)...)
	resp, err := client.Chat.Completions.New(t.Context(), osdk.ChatCompletionNewParams{
		Model: "gpt-4.1-mini", Messages: []osdk.ChatCompletionMessageParamUnion{osdk.UserMessage("hello")},
	})
	require.NoError(t, err)
	assert.Equal(t, int64(40), resp.Usage.CompletionTokens)
	assert.Equal(t, 2, up.Requests(), "the gateway's two attempts; the SDK's own retries are off")

	r := l.WaitRequest(t, "req-gw")
	assert.Equal(t, ledgertest.StatusSucceeded, r.Status)
	assert.Equal(t, "sess-gw", r.SessionID)
	assert.Equal(t, openai.Name, r.Provider)
	assert.Equal(t, 2, r.Attempts)
	assert.Equal(t, 1, r.WinningAttempt)
	assert.Equal(t, ledger.Usage{InputTokens: 300, OutputTokens: 40}, r.Usage)
	assert.Equal(t, r.Usage, r.Billed)
	s := l.Session(t, "sess-gw")
	assert.Equal(t, int64(1), s.Requests, "one logical call")
}

// An OpenAI-compatible upstream mounted under its own name: the client
// calls GATEWAY/corp/v1, the retry is the gateway's, and the ledger
// records provider "corp".
func TestGatewayOpenAICompatibleUpstream(t *testing.T) {
	l := ledgertest.Start(t)
	up := ledgertest.FakeOpenAI(t, ledgertest.Overloaded(), ledgertest.Succeed(ledger.Usage{InputTokens: 80, OutputTokens: 9}))
	gw := ledgertest.StartGateway(t, l, ledgertest.GatewayCompatible("corp", up), gateway.WithRetryPolicy(quick))

	client := osdk.NewClient(append([]ooption.RequestOption{ooption.WithBaseURL(gw.URL() + "/corp/v1"), ooption.WithAPIKey("test"),
		ooption.WithHeader("X-Ledger-Session-Id", "sess-corp"), ooption.WithHeader("X-Ledger-Request-Id", "req-corp")}, openai.ClientOptions()...)...)
	_, err := client.Chat.Completions.New(t.Context(), osdk.ChatCompletionNewParams{
		Model: "corp-large", Messages: []osdk.ChatCompletionMessageParamUnion{osdk.UserMessage("hello")},
	})
	require.NoError(t, err)
	r := l.WaitRequest(t, "req-corp")
	assert.Equal(t, "corp", r.Provider)
	assert.Equal(t, 2, r.Attempts)
	assert.Equal(t, ledger.Usage{InputTokens: 80, OutputTokens: 9}, r.Usage)

	_, err = gateway.New(gateway.WithPublisher(l.Publisher(t)), gateway.WithOpenAICompatible("openai", "", "http://127.0.0.1:1"))
	require.ErrorIs(t, err, ledger.ErrInvalidOption)
	assert.Contains(t, err.Error(), "already registered", "a built-in name is taken")
	_, err = gateway.New(gateway.WithPublisher(l.Publisher(t)), gateway.WithOpenAICompatible("corp", "", ""))
	require.ErrorIs(t, err, ledger.ErrInvalidOption)
	assert.Contains(t, err.Error(), "WithOpenAICompatible")
}

// P25 through the gateway: the provider bills a streamed attempt and
// then fails it. Its first event had reached the client, so the gateway
// cannot retry it; the client calls again with the same request ID, and
// the gateway makes that attempt 2 of the same request. The ledger has
// one logical call: usage is the winning attempt's, billed counts the
// failed attempt's input too.
func TestGatewayBilledFailureThenRetry(t *testing.T) {
	l := ledgertest.Start(t)
	up := ledgertest.FakeAnthropic(t,
		ledgertest.FailAfterBilling(ledger.Usage{InputTokens: 500}),
		ledgertest.Succeed(ledger.Usage{InputTokens: 500, OutputTokens: 1200}))
	gw := ledgertest.StartGateway(t, l, ledgertest.GatewayUpstream(up), gateway.WithRetryPolicy(quick))
	client := asdk.NewClient(append([]aoption.RequestOption{aoption.WithBaseURL(gw.URL()), aoption.WithAPIKey("test"),
		aoption.WithHeader("X-Ledger-Session-Id", "sess-p25"), aoption.WithHeader("X-Ledger-Request-Id", "req-p25")}, anthropic.ClientOptions()...)...)
	call := streamCall(client)

	_, _, err := call(t.Context(), ledger.Attempt{})
	require.Error(t, err, "the stream broke after the provider billed it")
	msg, _, err := call(t.Context(), ledger.Attempt{})
	require.NoError(t, err)
	assert.Equal(t, int64(1200), msg.Usage.OutputTokens)
	assert.Equal(t, 2, up.Requests())

	r := l.WaitRequest(t, "req-p25")
	assert.Equal(t, ledgertest.StatusSucceeded, r.Status)
	assert.Equal(t, 2, r.Attempts)
	assert.Equal(t, 1, r.WinningAttempt, "attempt numbers start at 0")
	assert.Equal(t, ledger.Usage{InputTokens: 500, OutputTokens: 1200}, r.Usage)
	assert.Equal(t, ledger.Usage{InputTokens: 1000, OutputTokens: 1200}, r.Billed, "the billed overhead of the failed attempt")
	assert.Equal(t, int64(1), l.Session(t, "sess-p25").Requests, "one logical call")
}
