package ledgertest_test

import (
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger"
	internaltest "github.com/agentledger/ledger/internal/ledgertest"
	"github.com/agentledger/ledger/internal/projection"
	"github.com/agentledger/ledger/ledgertest"
	"github.com/agentledger/ledger/provider/anthropic"
)

// anthropicClient is the SDK's client for up, its own retries off.
func anthropicClient(up *ledgertest.Upstream) sdk.Client {
	return sdk.NewClient(append([]option.RequestOption{option.WithBaseURL(up.URL()), option.WithAPIKey("test")}, anthropic.ClientOptions()...)...)
}

// A request that was never written: the lookups report it absent without
// failing, and Request fails saying what is missing, whether the ledger
// is still empty (it used to fail with "opening ledger_requests (is an
// aggregator running?): nats: bucket not found", even after WaitCaughtUp)
// or has other records.
func TestRequestNeverWritten(t *testing.T) {
	l := ledgertest.Start(t)
	l.WaitCaughtUp(t)

	_, ok := l.LookupRequest(t, "req-none")
	assert.False(t, ok, "LookupRequest on an empty ledger")
	_, ok = l.LookupSession(t, "sess-none")
	assert.False(t, ok, "LookupSession on an empty ledger")
	msg := fatalOf(func(tb testing.TB) { l.Request(tb, "req-none") })
	assert.Contains(t, msg, `no request "req-none": nothing has been written to the ledger yet`)
	assert.NotContains(t, msg, "bucket not found")
	msg = fatalOf(func(tb testing.TB) { l.Session(tb, "sess-none") })
	assert.Contains(t, msg, `no session "sess-none": nothing has been written to the ledger yet`)

	up := ledgertest.FakeAnthropic(t, ledgertest.Succeed(ledger.Usage{InputTokens: 1, OutputTokens: 1}))
	mw, err := ledger.NewMiddleware(l.Publisher(t), ledger.WithPolicy(quick), ledger.WithClassifiers(anthropic.Classifier))
	require.NoError(t, err)
	_, err = ledger.Do(t.Context(), mw, ledger.Call{SessionID: "s", RequestID: "req-made", Provider: anthropic.Name, Model: "m"}, streamCall(anthropicClient(up)))
	require.NoError(t, err)
	l.WaitCaughtUp(t)

	_, ok = l.LookupRequest(t, "req-none")
	assert.False(t, ok, "LookupRequest of a request never made, on a ledger with records")
	msg = fatalOf(func(tb testing.TB) { l.Request(tb, "req-none") })
	assert.Contains(t, msg, `no request "req-none": the ledger has no record of it`)
	r, ok := l.LookupRequest(t, "req-made")
	assert.True(t, ok)
	assert.Equal(t, ledgertest.StatusSucceeded, r.Status)
	assert.Empty(t, fatalOf(func(tb testing.TB) { l.Request(tb, "req-made") }))
}

// WaitRequest waits until the request's final record is there: here the
// aggregator starts only after the call was published, so the record
// appears after WaitRequest began to wait.
func TestWaitRequestWaitsForTheRecord(t *testing.T) {
	l := ledgertest.Start(t, ledgertest.WithoutAggregator())
	up := ledgertest.FakeAnthropic(t, ledgertest.ServerError(), ledgertest.Succeed(ledger.Usage{InputTokens: 70, OutputTokens: 7}))
	mw, err := ledger.NewMiddleware(l.Publisher(t), ledger.WithPolicy(quick), ledger.WithClassifiers(anthropic.Classifier))
	require.NoError(t, err)
	res, err := ledger.DoResult(t.Context(), mw, ledger.Call{SessionID: "s", Provider: anthropic.Name, Model: "m"}, streamCall(anthropicClient(up)))
	require.NoError(t, err)
	_, ok := l.LookupRequest(t, res.RequestID)
	require.False(t, ok, "no aggregator yet: no record")

	internaltest.RunAggregator(t, l.Connect(t).JetStream(), projection.Config{LeaseTTL: time.Second})
	r := l.WaitRequest(t, res.RequestID)
	assert.Equal(t, ledgertest.StatusSucceeded, r.Status)
	assert.Equal(t, 2, r.Attempts)
	assert.Equal(t, ledger.Usage{InputTokens: 70, OutputTokens: 7}, r.Usage)
}

// DoResult returns the request_id the middleware made, on success (Do
// returned only the value), and its attempts; on failure too.
func TestDoResultReturnsTheRequestID(t *testing.T) {
	l := ledgertest.Start(t)
	up := ledgertest.FakeAnthropic(t,
		ledgertest.RateLimited(time.Millisecond), ledgertest.Succeed(ledger.Usage{InputTokens: 5, OutputTokens: 5}),
		ledgertest.BadRequest())
	mw, err := ledger.NewMiddleware(l.Publisher(t), ledger.WithPolicy(quick), ledger.WithClassifiers(anthropic.Classifier))
	require.NoError(t, err)
	client := anthropicClient(up)

	ok, err := ledger.DoResult(t.Context(), mw, ledger.Call{SessionID: "s", Provider: anthropic.Name, Model: "m"}, streamCall(client))
	require.NoError(t, err)
	require.NotEmpty(t, ok.RequestID)
	assert.Equal(t, 2, ok.Attempts)
	assert.Equal(t, int64(5), ok.Value.Usage.OutputTokens)

	failed, err := ledger.DoResult(t.Context(), mw, ledger.Call{SessionID: "s", Provider: anthropic.Name, Model: "m"}, streamCall(client))
	var ce *ledger.CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, ce.RequestID, failed.RequestID)
	assert.Equal(t, 1, failed.Attempts)
	assert.Nil(t, failed.Value)
	assert.NotEqual(t, ok.RequestID, failed.RequestID)

	assert.Equal(t, ledgertest.StatusSucceeded, l.WaitRequest(t, ok.RequestID).Status)
	assert.Equal(t, ledgertest.StatusFailed, l.WaitRequest(t, failed.RequestID).Status)
}
