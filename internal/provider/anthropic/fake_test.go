package anthropic

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/sim/fakeprovider"
	fpt "github.com/agentledger/ledger/internal/sim/fakeprovider/fakeprovidertest"
)

func fakeServer(t *testing.T, opts fakeprovider.Options) *fakeprovider.Server {
	t.Helper()
	return fpt.Start(t, opts, FakeDialect())
}

func fakeClient(base string) sdk.Client {
	return sdk.NewClient(option.WithBaseURL(base), option.WithAPIKey("test-key"), option.WithMaxRetries(0))
}

func fakeOpts(requestID string, attempt int) []option.RequestOption {
	var opts []option.RequestOption
	for k, v := range fpt.LedgerHeaders(requestID, attempt) {
		opts = append(opts, option.WithHeader(k, v))
	}
	return opts
}

func fakeParams() sdk.MessageNewParams {
	return sdk.MessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 4096,
		Messages:  []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("Hello"))},
	}
}

func TestFakeSuccess(t *testing.T) {
	s := fakeServer(t, fakeprovider.Options{})
	c := fakeClient(s.BaseURL(Name))
	id := fpt.FindRequest(t, s.Plan(), "ant-ok", fakeprovider.FaultNone)
	want := s.PlannedUsage(Name, id)

	t.Run("non-streaming", func(t *testing.T) {
		msg, err := c.Messages.New(fpt.AttemptCtx(t), fakeParams(), fakeOpts(id, 0)...)
		require.NoError(t, err)
		assert.Equal(t, want, UsageOf(msg.Usage))
		assert.Equal(t, sdk.StopReasonEndTurn, msg.StopReason)
		require.Len(t, msg.Content, 1)
		assert.Contains(t, msg.Content[0].Text, id)
	})
	t.Run("streaming", func(t *testing.T) {
		var raw *http.Response
		stream := c.Messages.NewStreaming(fpt.AttemptCtx(t), fakeParams(), append(fakeOpts(id, 1), option.WithResponseInto(&raw))...)
		var msg sdk.Message
		for stream.Next() {
			require.NoError(t, msg.Accumulate(stream.Current()))
		}
		require.NoError(t, stream.Err())
		assert.Equal(t, want, UsageOf(msg.Usage))
		require.Len(t, msg.Content, 1)
		assert.Contains(t, msg.Content[0].Text, id)
		require.NotNil(t, raw)
		assert.NotEmpty(t, raw.Header.Get("request-id"))
	})

	truth := s.Truth()
	rt := truth.Requests[id]
	assert.True(t, rt.Succeeded)
	assert.Equal(t, Name, rt.Provider)
	assert.Equal(t, want, rt.Usage, "the usage of the call is that of one successful attempt")
	assert.Equal(t, want.Add(want), rt.Billed, "both successful attempts were billed")
	assert.Equal(t, int64(2), truth.Total.Attempts)
	assert.Equal(t, int64(2), truth.Total.Succeeded)
	assert.Equal(t, int64(1), truth.Total.Requests)
	assert.Equal(t, int64(1), truth.Sessions[fpt.Session].RequestsSucceeded)
}

// The plan gives some Anthropic calls cache writes: the dialect declares
// that the API bills them.
func TestFakeCacheWrites(t *testing.T) {
	s := fakeServer(t, fakeprovider.Options{})
	writes := 0
	for i := range 50 {
		if s.PlannedUsage(Name, "cw-"+strconv.Itoa(i)).CacheCreationInputTokens > 0 {
			writes++
		}
	}
	assert.Positive(t, writes)
}

func TestFakeFaults(t *testing.T) {
	s := fakeServer(t, fakeprovider.Options{})
	c := fakeClient(s.BaseURL(Name))
	tests := []struct {
		fault   fakeprovider.Fault
		status  int
		errType sdk.ErrorType
	}{
		{fakeprovider.FaultRateLimit, http.StatusTooManyRequests, sdk.ErrorTypeRateLimitError},
		{fakeprovider.FaultOverload, 529, sdk.ErrorTypeOverloadedError},
		{fakeprovider.FaultServerError, http.StatusInternalServerError, sdk.ErrorTypeAPIError},
		{fakeprovider.FaultBadRequest, http.StatusBadRequest, sdk.ErrorTypeInvalidRequestError},
	}
	for _, tt := range tests {
		t.Run(string(tt.fault), func(t *testing.T) {
			id := fpt.FindRequest(t, s.Plan(), "ant-"+string(tt.fault), tt.fault)
			_, err := c.Messages.New(fpt.AttemptCtx(t), fakeParams(), fakeOpts(id, 0)...)
			var ae *sdk.Error
			require.ErrorAs(t, err, &ae)
			assert.Equal(t, tt.status, ae.StatusCode)
			assert.Equal(t, tt.errType, ae.Type())
			assert.NotEmpty(t, ae.RequestID)
			if tt.fault == fakeprovider.FaultRateLimit {
				d := s.Plan().Decide(id, 0).RetryAfter
				assert.Equal(t, strconv.FormatInt(d.Milliseconds(), 10), ae.Response.Header.Get("retry-after-ms"))
				assert.NotEmpty(t, ae.Response.Header.Get("retry-after"))
				assert.GreaterOrEqual(t, d, fakeprovider.MinRetryAfter)
				assert.LessOrEqual(t, d, fakeprovider.MaxRetryAfter)
			}
			rt := s.Truth().Requests[id]
			require.Len(t, rt.Attempts, 1)
			assert.Equal(t, tt.fault, rt.Attempts[0].Outcome)
			assert.True(t, rt.Billed.IsZero(), "an error response bills nothing")
		})
	}
}

func TestFakeBilledTimeout(t *testing.T) {
	s := fakeServer(t, fakeprovider.Options{})
	c := fakeClient(s.BaseURL(Name))
	id := fpt.FindRequest(t, s.Plan(), "ant-stall", fakeprovider.FaultBilledTimeout)
	want := s.PlannedUsage(Name, id)

	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
	defer cancel()
	stream := c.Messages.NewStreaming(ctx, fakeParams(), fakeOpts(id, 0)...)
	var msg sdk.Message
	var started bool
	for stream.Next() {
		ev := stream.Current()
		started = started || ev.Type == "message_start"
		require.NoError(t, msg.Accumulate(ev))
	}
	require.True(t, started, "message_start arrives before the stall")
	require.ErrorIs(t, stream.Err(), context.DeadlineExceeded)

	billed := want
	billed.OutputTokens = fakeprovider.StalledOutputTokens
	assert.Equal(t, billed, UsageOf(msg.Usage), "message_start reports the billed input")
	rt := s.Truth().Requests[id]
	require.Len(t, rt.Attempts, 1)
	assert.Equal(t, fakeprovider.FaultBilledTimeout, rt.Attempts[0].Outcome)
	assert.Equal(t, billed, rt.Billed)
	assert.False(t, rt.Succeeded)
	assert.True(t, rt.Usage.IsZero())

	t.Run("non-streaming stalls unbilled", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		_, err := c.Messages.New(ctx, fakeParams(), fakeOpts(id, 0)...)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		rt := s.Truth().Requests[id]
		require.Len(t, rt.Attempts, 2)
		assert.Equal(t, fakeprovider.FaultTimeout, rt.Attempts[1].Outcome)
		assert.True(t, rt.Attempts[1].Billed.IsZero())
	})
}

// A broken stream bills its input and the tokens it streamed; the deltas
// after message_start carry no counts, so what the client can count
// (StreamUsage) is the billed input and one output token.
func TestFakeBrokenStream(t *testing.T) {
	s := fpt.Listen(t, fakeprovider.Options{Seed: 9, Mix: fakeprovider.Mix{RateLimit: 0.2, BrokenStream: 0.5}}, FakeDialect())
	p := s.Plan()
	id := fpt.FindRequest(t, p, "broken", fakeprovider.FaultBrokenStream)
	c := fakeClient(s.URL())
	stream := c.Messages.NewStreaming(context.Background(), fakeParams(), fakeOpts(id, 0)...)
	var u StreamUsage
	for stream.Next() {
		u.Observe(stream.Current())
	}
	require.Error(t, stream.Err(), "the stream breaks")

	rt := s.Truth().Requests[id]
	require.Len(t, rt.Attempts, 1)
	a := rt.Attempts[0]
	assert.Equal(t, fakeprovider.FaultBrokenStream, a.Outcome)
	full := s.PlannedUsage(Name, id)
	assert.Equal(t, full.InputTokens, a.Billed.InputTokens, "the input is billed")
	assert.Equal(t, p.BreakAfter(id, 0, full.OutputTokens), a.Billed.OutputTokens, "and the tokens streamed")
	assert.Equal(t, events.Usage{OutputTokens: a.Billed.OutputTokens - 1}, a.Unobservable)
	assert.Equal(t, a.Billed.Sub(a.Unobservable), u.Usage(), "what the client counted is what is observable")
}

// A request that does not stream gets its connection cut before any answer,
// unbilled.
func TestFakeBrokenStreamOnARequestThatDoesNotStream(t *testing.T) {
	s := fpt.Listen(t, fakeprovider.Options{Seed: 9, Mix: fakeprovider.Mix{RateLimit: 0.2, BrokenStream: 0.5}}, FakeDialect())
	id := fpt.FindRequest(t, s.Plan(), "disconnect", fakeprovider.FaultBrokenStream)
	req, err := http.NewRequest(http.MethodPost, s.URL()+"/v1/messages", strings.NewReader(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`))
	require.NoError(t, err)
	for k, v := range fpt.LedgerHeaders(id, 0) {
		req.Header.Set(k, v)
	}
	req.Header.Set("X-Api-Key", "k")
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	require.Error(t, err, "no response at all")
	rt := s.Truth().Requests[id]
	require.Len(t, rt.Attempts, 1)
	assert.Equal(t, fakeprovider.FaultDisconnect, rt.Attempts[0].Outcome)
	assert.Zero(t, rt.Billed)
}

func TestFakeUnidentifiedRequests(t *testing.T) {
	s := fakeServer(t, fakeprovider.Options{})
	c := fakeClient(s.BaseURL(Name))
	tests := []struct {
		name    string
		headers map[string]string
	}{
		{"no headers", nil},
		{"bad session", map[string]string{fakeprovider.HeaderSessionID: "a.b", fakeprovider.HeaderRequestID: "r", fakeprovider.HeaderAttempt: "0"}},
		{"bad attempt", map[string]string{fakeprovider.HeaderSessionID: "s", fakeprovider.HeaderRequestID: "r", fakeprovider.HeaderAttempt: "-1"}},
		{"attempt not a number", map[string]string{fakeprovider.HeaderSessionID: "s", fakeprovider.HeaderRequestID: "r", fakeprovider.HeaderAttempt: "x"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts []option.RequestOption
			for k, v := range tt.headers {
				opts = append(opts, option.WithHeader(k, v))
			}
			_, err := c.Messages.New(fpt.AttemptCtx(t), fakeParams(), opts...)
			var ae *sdk.Error
			require.ErrorAs(t, err, &ae)
			assert.Equal(t, http.StatusBadRequest, ae.StatusCode)
			truth := s.Truth()
			assert.Equal(t, int64(i+1), truth.Unidentified)
			assert.Zero(t, truth.Total.Attempts)
		})
	}
}

func TestFakeMalformedRequestIsInvalid(t *testing.T) {
	s := fakeServer(t, fakeprovider.Options{})
	c := fakeClient(s.BaseURL(Name))
	p := fakeParams()
	p.Messages = nil
	_, err := c.Messages.New(fpt.AttemptCtx(t), p, fakeOpts("bad-body", 0)...)
	var ae *sdk.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusBadRequest, ae.StatusCode)
	rt := s.Truth().Requests["bad-body"]
	require.Len(t, rt.Attempts, 1)
	assert.Equal(t, fakeprovider.FaultInvalid, rt.Attempts[0].Outcome)
}

// The dialect's Sim drives the SDK against the fake provider.
func TestFakeSimCaller(t *testing.T) { fpt.CheckSim(t, FakeDialect()) }
