package ledgertest_test

import (
	"context"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger"
	"github.com/agentledger/ledger/ledgertest"
	"github.com/agentledger/ledger/provider/anthropic"
)

// quick is a policy for tests: short waits between attempts.
var quick = ledger.Policy{MaxRetries: 2, BaseDelay: 5 * time.Millisecond, MaxDelay: 50 * time.Millisecond, HintCap: time.Second}

// streamCall is an agent's call: a streamed message whose usage is
// followed event by event, so that a stream that fails midway still
// reports what was billed.
func streamCall(client sdk.Client) func(ctx context.Context, a ledger.Attempt) (*sdk.Message, ledger.Report, error) {
	return func(ctx context.Context, a ledger.Attempt) (*sdk.Message, ledger.Report, error) {
		stream := client.Messages.NewStreaming(ctx, sdk.MessageNewParams{
			Model: "claude-sonnet-4-5", MaxTokens: 2048,
			Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("hello"))},
		})
		defer stream.Close()
		var usage anthropic.StreamUsage
		var msg sdk.Message
		for stream.Next() {
			ev := stream.Current()
			usage.Observe(ev)
			if err := msg.Accumulate(ev); err != nil {
				return nil, ledger.Report{Usage: usage.Usage()}, err
			}
		}
		return &msg, ledger.Report{Usage: usage.Usage()}, stream.Err()
	}
}

// P25: the provider bills a failed attempt, the retry succeeds. The
// ledger's usage is the winning attempt's; billed counts both.
func TestBilledFailureThenSuccess(t *testing.T) {
	l := ledgertest.Start(t)
	up := ledgertest.FakeAnthropic(t,
		ledgertest.FailAfterBilling(ledger.Usage{InputTokens: 500}),
		ledgertest.Succeed(ledger.Usage{InputTokens: 500, OutputTokens: 1200}))
	mw, err := ledger.NewMiddleware(l.Publisher(t), ledger.WithPolicy(quick), ledger.WithClassifiers(anthropic.Classifier))
	require.NoError(t, err)
	client := sdk.NewClient(append([]option.RequestOption{option.WithBaseURL(up.URL()), option.WithAPIKey("test")}, anthropic.ClientOptions()...)...)

	call := ledger.Call{SessionID: "sess-p25", RequestID: "req-p25", Provider: anthropic.Name, Model: "claude-sonnet-4-5"}
	msg, err := ledger.Do(t.Context(), mw, call, streamCall(client))
	require.NoError(t, err)
	assert.Equal(t, int64(1200), msg.Usage.OutputTokens)
	assert.Equal(t, 2, up.Requests(), "one request per attempt: the SDK's own retries are off")

	l.WaitCaughtUp(t)
	r := l.Request(t, "req-p25")
	assert.Equal(t, ledger.Usage{InputTokens: 500, OutputTokens: 1200}, r.Usage)
	assert.Equal(t, ledger.Usage{InputTokens: 1000, OutputTokens: 1200}, r.Billed)
	assert.Equal(t, ledgertest.StatusSucceeded, r.Status)
	assert.Equal(t, 2, r.Attempts)
	assert.Equal(t, 1, r.WinningAttempt)
	s := l.Session(t, "sess-p25")
	assert.Equal(t, r.Usage, s.Usage)
	assert.Equal(t, r.Billed, s.Billed)
	assert.Equal(t, int64(1), s.Requests)
}

// A call that never succeeds: a rate limit with its hint, an overload,
// then a bad request, which is not retried. The error is the public
// CallError; the ledger records a failed request with three attempts.
func TestFailedCall(t *testing.T) {
	l := ledgertest.Start(t)
	up := ledgertest.FakeAnthropic(t, ledgertest.RateLimited(10*time.Millisecond), ledgertest.Overloaded(), ledgertest.BadRequest())
	mw, err := ledger.NewMiddleware(l.Publisher(t), ledger.WithPolicy(ledger.Policy{MaxRetries: 5, BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond, HintCap: time.Second}),
		ledger.WithClassifiers(anthropic.Classifier))
	require.NoError(t, err)
	client := sdk.NewClient(append([]option.RequestOption{option.WithBaseURL(up.URL()), option.WithAPIKey("test")}, anthropic.ClientOptions()...)...)
	_, err = ledger.Do(t.Context(), mw, ledger.Call{SessionID: "s", RequestID: "r", Provider: anthropic.Name, Model: "m"}, streamCall(client))
	var ce *ledger.CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, ledger.StopNonRetryable, ce.Reason)
	assert.Equal(t, ledger.KindClient, ce.Classification.Kind)
	var apiErr *sdk.Error
	assert.ErrorAs(t, err, &apiErr, "the SDK's error stays reachable")
	assert.Equal(t, 3, ce.Attempts)

	l.WaitCaughtUp(t)
	r := l.Request(t, "r")
	assert.Equal(t, ledgertest.StatusFailed, r.Status)
	assert.Equal(t, 3, r.Attempts)
	assert.Equal(t, ledger.MiddlewareStats{Calls: 1, Attempts: 3, Retries: 2, Events: 3}, mw.Stats())
}
