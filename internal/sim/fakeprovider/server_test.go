package fakeprovider_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/sim/fakeprovider"
)

// TestMain silences the standard logger, through which genai reports every
// stream that fails, as the stalled ones here do on purpose.
func TestMain(m *testing.M) {
	log.SetOutput(io.Discard)
	os.Exit(m.Run())
}

// mix makes every fault likely enough that findRequest finds one fast.
var mix = fakeprovider.Mix{RateLimit: 0.2, Overload: 0.2, ServerError: 0.2, BilledTimeout: 0.2, BadRequest: 0.1}

func start(t *testing.T) *fakeprovider.Server {
	t.Helper()
	s, err := fakeprovider.New(fakeprovider.Options{Seed: 42, Mix: mix})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

// findRequest returns a request ID whose first two attempts get the fault.
func findRequest(t *testing.T, p fakeprovider.Plan, prefix string, want fakeprovider.Fault) string {
	t.Helper()
	for i := range 100000 {
		id := fmt.Sprintf("%s-%d", prefix, i)
		if p.Decide(id, 0).Fault == want && p.Decide(id, 1).Fault == want {
			return id
		}
	}
	t.Fatalf("no request ID with fault %s", want)
	return ""
}

const session = "sess-1"

func ledgerHeaders(requestID string, attempt int) map[string]string {
	return map[string]string{
		fakeprovider.HeaderSessionID: session,
		fakeprovider.HeaderRequestID: requestID,
		fakeprovider.HeaderAttempt:   strconv.Itoa(attempt),
	}
}

// attemptCtx bounds a call the way the retry middleware's attempt timeout
// does; a stalled stream ends when it expires.
func attemptCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func anthropicClient(s *fakeprovider.Server) anthropic.Client {
	return anthropic.NewClient(
		aoption.WithBaseURL(s.BaseURL(fakeprovider.Anthropic)),
		aoption.WithAPIKey("test-key"),
		aoption.WithMaxRetries(0),
	)
}

func anthropicOpts(requestID string, attempt int) []aoption.RequestOption {
	var opts []aoption.RequestOption
	for k, v := range ledgerHeaders(requestID, attempt) {
		opts = append(opts, aoption.WithHeader(k, v))
	}
	return opts
}

func anthropicParams() anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 4096,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hello"))},
	}
}

// anthropicUsage converts the SDK's usage to the contract's.
func anthropicUsage(u anthropic.Usage) events.Usage {
	return events.Usage{
		InputTokens:              u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens,
		OutputTokens:             u.OutputTokens,
		CacheReadInputTokens:     u.CacheReadInputTokens,
		CacheCreationInputTokens: u.CacheCreationInputTokens,
	}
}

func TestAnthropicSuccess(t *testing.T) {
	s := start(t)
	c := anthropicClient(s)
	id := findRequest(t, s.Plan(), "ant-ok", fakeprovider.FaultNone)
	want := s.Plan().Usage(fakeprovider.Anthropic, id)

	t.Run("non-streaming", func(t *testing.T) {
		msg, err := c.Messages.New(attemptCtx(t), anthropicParams(), anthropicOpts(id, 0)...)
		require.NoError(t, err)
		assert.Equal(t, want, anthropicUsage(msg.Usage))
		assert.Equal(t, anthropic.StopReasonEndTurn, msg.StopReason)
		require.Len(t, msg.Content, 1)
		assert.Contains(t, msg.Content[0].Text, id)
	})
	t.Run("streaming", func(t *testing.T) {
		var raw *http.Response
		stream := c.Messages.NewStreaming(attemptCtx(t), anthropicParams(), append(anthropicOpts(id, 1), aoption.WithResponseInto(&raw))...)
		var msg anthropic.Message
		for stream.Next() {
			require.NoError(t, msg.Accumulate(stream.Current()))
		}
		require.NoError(t, stream.Err())
		assert.Equal(t, want, anthropicUsage(msg.Usage))
		require.Len(t, msg.Content, 1)
		assert.Contains(t, msg.Content[0].Text, id)
		require.NotNil(t, raw)
		assert.NotEmpty(t, raw.Header.Get("request-id"))
	})

	truth := s.Truth()
	rt := truth.Requests[id]
	assert.True(t, rt.Succeeded)
	assert.Equal(t, want, rt.Usage, "the usage of the call is that of one successful attempt")
	assert.Equal(t, want.Add(want), rt.Billed, "both successful attempts were billed")
	assert.Equal(t, int64(2), truth.Total.Attempts)
	assert.Equal(t, int64(2), truth.Total.Succeeded)
	assert.Equal(t, int64(1), truth.Total.Requests)
	assert.Equal(t, int64(1), truth.Sessions[session].RequestsSucceeded)
}

func TestAnthropicFaults(t *testing.T) {
	s := start(t)
	c := anthropicClient(s)
	tests := []struct {
		fault   fakeprovider.Fault
		status  int
		errType anthropic.ErrorType
	}{
		{fakeprovider.FaultRateLimit, http.StatusTooManyRequests, anthropic.ErrorTypeRateLimitError},
		{fakeprovider.FaultOverload, 529, anthropic.ErrorTypeOverloadedError},
		{fakeprovider.FaultServerError, http.StatusInternalServerError, anthropic.ErrorTypeAPIError},
		{fakeprovider.FaultBadRequest, http.StatusBadRequest, anthropic.ErrorTypeInvalidRequestError},
	}
	for _, tt := range tests {
		t.Run(string(tt.fault), func(t *testing.T) {
			id := findRequest(t, s.Plan(), "ant-"+string(tt.fault), tt.fault)
			_, err := c.Messages.New(attemptCtx(t), anthropicParams(), anthropicOpts(id, 0)...)
			var ae *anthropic.Error
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

func TestAnthropicBilledTimeout(t *testing.T) {
	s := start(t)
	c := anthropicClient(s)
	id := findRequest(t, s.Plan(), "ant-stall", fakeprovider.FaultBilledTimeout)
	want := s.Plan().Usage(fakeprovider.Anthropic, id)

	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
	defer cancel()
	stream := c.Messages.NewStreaming(ctx, anthropicParams(), anthropicOpts(id, 0)...)
	var msg anthropic.Message
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
	assert.Equal(t, billed, anthropicUsage(msg.Usage), "message_start reports the billed input")
	rt := s.Truth().Requests[id]
	require.Len(t, rt.Attempts, 1)
	assert.Equal(t, fakeprovider.FaultBilledTimeout, rt.Attempts[0].Outcome)
	assert.Equal(t, billed, rt.Billed)
	assert.False(t, rt.Succeeded)
	assert.True(t, rt.Usage.IsZero())

	t.Run("non-streaming stalls unbilled", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		_, err := c.Messages.New(ctx, anthropicParams(), anthropicOpts(id, 0)...)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		rt := s.Truth().Requests[id]
		require.Len(t, rt.Attempts, 2)
		assert.Equal(t, fakeprovider.FaultTimeout, rt.Attempts[1].Outcome)
		assert.True(t, rt.Attempts[1].Billed.IsZero())
	})
}

func openaiClient(s *fakeprovider.Server) openai.Client {
	return openai.NewClient(
		ooption.WithBaseURL(s.BaseURL(fakeprovider.OpenAI)),
		ooption.WithAPIKey("test-key"),
		ooption.WithMaxRetries(0),
	)
}

func openaiOpts(requestID string, attempt int) []ooption.RequestOption {
	var opts []ooption.RequestOption
	for k, v := range ledgerHeaders(requestID, attempt) {
		opts = append(opts, ooption.WithHeader(k, v))
	}
	return opts
}

func openaiParams() openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    "gpt-4.1-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello")},
	}
}

func TestOpenAISuccess(t *testing.T) {
	s := start(t)
	c := openaiClient(s)
	id := findRequest(t, s.Plan(), "oai-ok", fakeprovider.FaultNone)
	want := s.Plan().Usage(fakeprovider.OpenAI, id)

	var raw *http.Response
	cc, err := c.Chat.Completions.New(attemptCtx(t), openaiParams(), append(openaiOpts(id, 0), ooption.WithResponseInto(&raw))...)
	require.NoError(t, err)
	assert.Equal(t, want.InputTokens, cc.Usage.PromptTokens)
	assert.Equal(t, want.OutputTokens, cc.Usage.CompletionTokens)
	assert.Equal(t, want.CacheReadInputTokens, cc.Usage.PromptTokensDetails.CachedTokens)
	assert.Equal(t, want.InputTokens+want.OutputTokens, cc.Usage.TotalTokens)
	assert.Zero(t, want.CacheCreationInputTokens, "OpenAI reports no cache writes")
	require.Len(t, cc.Choices, 1)
	assert.Contains(t, cc.Choices[0].Message.Content, id)
	assert.Equal(t, "stop", cc.Choices[0].FinishReason)
	assert.NotEmpty(t, raw.Header.Get("x-request-id"))

	rt := s.Truth().Requests[id]
	assert.True(t, rt.Succeeded)
	assert.Equal(t, want, rt.Usage)
	assert.Equal(t, fakeprovider.OpenAI, rt.Provider)
	assert.Equal(t, "gpt-4.1-mini", rt.Model)
}

func TestOpenAIFaults(t *testing.T) {
	s := start(t)
	c := openaiClient(s)
	tests := []struct {
		fault  fakeprovider.Fault
		status int
	}{
		{fakeprovider.FaultRateLimit, http.StatusTooManyRequests},
		{fakeprovider.FaultOverload, http.StatusServiceUnavailable},
		{fakeprovider.FaultServerError, http.StatusInternalServerError},
		{fakeprovider.FaultBadRequest, http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(string(tt.fault), func(t *testing.T) {
			id := findRequest(t, s.Plan(), "oai-"+string(tt.fault), tt.fault)
			_, err := c.Chat.Completions.New(attemptCtx(t), openaiParams(), openaiOpts(id, 0)...)
			var oe *openai.Error
			require.ErrorAs(t, err, &oe)
			assert.Equal(t, tt.status, oe.StatusCode)
			assert.NotEmpty(t, oe.Message)
			assert.NotEmpty(t, oe.Response.Header.Get("x-request-id"))
			if tt.fault == fakeprovider.FaultRateLimit {
				assert.Equal(t, "rate_limit_exceeded", oe.Code)
				assert.NotEmpty(t, oe.Response.Header.Get("retry-after-ms"))
			}
			assert.Equal(t, tt.fault, s.Truth().Requests[id].Attempts[0].Outcome)
		})
	}

	t.Run("timeout stalls unbilled", func(t *testing.T) {
		id := findRequest(t, s.Plan(), "oai-stall", fakeprovider.FaultBilledTimeout)
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		_, err := c.Chat.Completions.New(ctx, openaiParams(), openaiOpts(id, 0)...)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		rt := s.Truth().Requests[id]
		assert.Equal(t, fakeprovider.FaultTimeout, rt.Attempts[0].Outcome)
		assert.True(t, rt.Billed.IsZero())
	})
}

func geminiClient(t *testing.T, s *fakeprovider.Server) *genai.Client {
	t.Helper()
	c, err := genai.NewClient(t.Context(), &genai.ClientConfig{
		APIKey:      "test-key",
		Backend:     genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: s.BaseURL(fakeprovider.Gemini)},
	})
	require.NoError(t, err)
	return c
}

func geminiConfig(requestID string, attempt int) *genai.GenerateContentConfig {
	h := http.Header{}
	for k, v := range ledgerHeaders(requestID, attempt) {
		h.Set(k, v)
	}
	return &genai.GenerateContentConfig{HTTPOptions: &genai.HTTPOptions{Headers: h}}
}

func geminiUsage(m *genai.GenerateContentResponseUsageMetadata) events.Usage {
	return events.Usage{
		InputTokens:          int64(m.PromptTokenCount),
		OutputTokens:         int64(m.CandidatesTokenCount),
		CacheReadInputTokens: int64(m.CachedContentTokenCount),
	}
}

const geminiModel = "gemini-2.5-flash"

func TestGeminiSuccess(t *testing.T) {
	s := start(t)
	c := geminiClient(t, s)
	id := findRequest(t, s.Plan(), "gem-ok", fakeprovider.FaultNone)
	want := s.Plan().Usage(fakeprovider.Gemini, id)

	t.Run("non-streaming", func(t *testing.T) {
		resp, err := c.Models.GenerateContent(attemptCtx(t), geminiModel, genai.Text("Hello"), geminiConfig(id, 0))
		require.NoError(t, err)
		require.NotNil(t, resp.UsageMetadata)
		assert.Equal(t, want, geminiUsage(resp.UsageMetadata))
		assert.Contains(t, resp.Text(), id)
		require.Len(t, resp.Candidates, 1)
		assert.Equal(t, genai.FinishReasonStop, resp.Candidates[0].FinishReason)
	})
	t.Run("streaming", func(t *testing.T) {
		var last *genai.GenerateContentResponse
		var text string
		for resp, err := range c.Models.GenerateContentStream(attemptCtx(t), geminiModel, genai.Text("Hello"), geminiConfig(id, 1)) {
			require.NoError(t, err)
			last = resp
			text += resp.Text()
		}
		require.NotNil(t, last)
		assert.Equal(t, want, geminiUsage(last.UsageMetadata))
		assert.Contains(t, text, id)
	})
	rt := s.Truth().Requests[id]
	assert.Equal(t, want, rt.Usage)
	assert.Equal(t, geminiModel, rt.Model)
}

func TestGeminiFaults(t *testing.T) {
	s := start(t)
	c := geminiClient(t, s)
	tests := []struct {
		fault  fakeprovider.Fault
		status int
		code   string
	}{
		{fakeprovider.FaultRateLimit, http.StatusTooManyRequests, "RESOURCE_EXHAUSTED"},
		{fakeprovider.FaultOverload, http.StatusServiceUnavailable, "UNAVAILABLE"},
		{fakeprovider.FaultServerError, http.StatusInternalServerError, "INTERNAL"},
		{fakeprovider.FaultBadRequest, http.StatusBadRequest, "INVALID_ARGUMENT"},
	}
	for _, tt := range tests {
		t.Run(string(tt.fault), func(t *testing.T) {
			id := findRequest(t, s.Plan(), "gem-"+string(tt.fault), tt.fault)
			_, err := c.Models.GenerateContent(attemptCtx(t), geminiModel, genai.Text("Hello"), geminiConfig(id, 0))
			var ge genai.APIError
			require.ErrorAs(t, err, &ge)
			assert.Equal(t, tt.status, ge.Code)
			assert.Equal(t, tt.code, ge.Status)
			if tt.fault == fakeprovider.FaultRateLimit {
				require.Len(t, ge.Details, 1)
				assert.Equal(t, "type.googleapis.com/google.rpc.RetryInfo", ge.Details[0]["@type"])
				d := s.Plan().Decide(id, 0).RetryAfter
				assert.Equal(t, fmt.Sprintf("%.3fs", d.Seconds()), ge.Details[0]["retryDelay"])
			}
			assert.Equal(t, tt.fault, s.Truth().Requests[id].Attempts[0].Outcome)
		})
	}

	t.Run("billed timeout", func(t *testing.T) {
		id := findRequest(t, s.Plan(), "gem-stall", fakeprovider.FaultBilledTimeout)
		billed := s.Plan().Usage(fakeprovider.Gemini, id)
		billed.OutputTokens = fakeprovider.StalledOutputTokens
		ctx, cancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
		defer cancel()
		var last *genai.GenerateContentResponse
		var streamErr error
		for resp, err := range c.Models.GenerateContentStream(ctx, geminiModel, genai.Text("Hello"), geminiConfig(id, 0)) {
			if err != nil {
				streamErr = err
				break
			}
			last = resp
		}
		require.ErrorIs(t, streamErr, context.DeadlineExceeded)
		require.NotNil(t, last, "the first chunk arrives before the stall")
		assert.Equal(t, billed, geminiUsage(last.UsageMetadata))
		rt := s.Truth().Requests[id]
		assert.Equal(t, fakeprovider.FaultBilledTimeout, rt.Attempts[0].Outcome)
		assert.Equal(t, billed, rt.Billed)
	})
}

func TestUnidentifiedRequests(t *testing.T) {
	s := start(t)
	c := anthropicClient(s)
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
			var opts []aoption.RequestOption
			for k, v := range tt.headers {
				opts = append(opts, aoption.WithHeader(k, v))
			}
			_, err := c.Messages.New(attemptCtx(t), anthropicParams(), opts...)
			var ae *anthropic.Error
			require.ErrorAs(t, err, &ae)
			assert.Equal(t, http.StatusBadRequest, ae.StatusCode)
			truth := s.Truth()
			assert.Equal(t, int64(i+1), truth.Unidentified)
			assert.Zero(t, truth.Total.Attempts)
		})
	}
}

func TestMalformedRequestIsInvalid(t *testing.T) {
	s := start(t)
	c := anthropicClient(s)
	p := anthropicParams()
	p.Messages = nil
	_, err := c.Messages.New(attemptCtx(t), p, anthropicOpts("bad-body", 0)...)
	var ae *anthropic.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusBadRequest, ae.StatusCode)
	rt := s.Truth().Requests["bad-body"]
	require.Len(t, rt.Attempts, 1)
	assert.Equal(t, fakeprovider.FaultInvalid, rt.Attempts[0].Outcome)
}

func TestCloseReleasesStalledRequests(t *testing.T) {
	s, err := fakeprovider.New(fakeprovider.Options{Seed: 1, Mix: fakeprovider.Mix{BilledTimeout: 1}})
	require.NoError(t, err)
	c := anthropicClient(s)
	done := make(chan error, 1)
	go func() {
		// No deadline: only Close can end the stall.
		_, err := c.Messages.New(context.Background(), anthropicParams(), anthropicOpts("stuck", 0)...)
		done <- err
	}()
	require.Eventually(t, func() bool { return s.Truth().Total.Attempts == 1 }, 30*time.Second, time.Millisecond)
	s.Close()
	select {
	case err := <-done:
		require.Error(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not release the stalled request")
	}
	s.Close() // idempotent
}
