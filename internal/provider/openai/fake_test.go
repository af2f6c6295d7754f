package openai

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/provider"
	"github.com/agentledger/ledger/internal/sim/fakeprovider"
	fpt "github.com/agentledger/ledger/internal/sim/fakeprovider/fakeprovidertest"
)

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

func fakeParams() sdk.ChatCompletionNewParams {
	return sdk.ChatCompletionNewParams{
		Model:    "gpt-4.1-mini",
		Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("Hello")},
	}
}

func fakeResponseParams() responses.ResponseNewParams {
	return responses.ResponseNewParams{Model: "gpt-4.1-mini", Input: responses.ResponseNewParamsInputUnion{OfString: sdk.String("hi")}}
}

func TestFakeSuccess(t *testing.T) {
	s := fpt.Start(t, fakeprovider.Options{}, OpenAIFakeDialect())
	c := fakeClient(s.BaseURL(Name))
	id := fpt.FindRequest(t, s.Plan(), "oai-ok", fakeprovider.FaultNone)
	want := s.PlannedUsage(Name, id)

	var raw *http.Response
	cc, err := c.Chat.Completions.New(fpt.AttemptCtx(t), fakeParams(), append(fakeOpts(id, 0), option.WithResponseInto(&raw))...)
	require.NoError(t, err)
	assert.Equal(t, want, UsageOf(cc.Usage))
	assert.Equal(t, want.InputTokens+want.OutputTokens, cc.Usage.TotalTokens)
	assert.Zero(t, want.CacheCreationInputTokens, "OpenAI reports no cache writes")
	require.Len(t, cc.Choices, 1)
	assert.Contains(t, cc.Choices[0].Message.Content, id)
	assert.Equal(t, "stop", cc.Choices[0].FinishReason)
	assert.NotEmpty(t, raw.Header.Get("x-request-id"))

	rt := s.Truth().Requests[id]
	assert.True(t, rt.Succeeded)
	assert.Equal(t, want, rt.Usage)
	assert.Equal(t, Name, rt.Provider)
	assert.Equal(t, "gpt-4.1-mini", rt.Model)
}

func TestFakeFaults(t *testing.T) {
	s := fpt.Start(t, fakeprovider.Options{}, OpenAIFakeDialect())
	c := fakeClient(s.BaseURL(Name))
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
			id := fpt.FindRequest(t, s.Plan(), "oai-"+string(tt.fault), tt.fault)
			_, err := c.Chat.Completions.New(fpt.AttemptCtx(t), fakeParams(), fakeOpts(id, 0)...)
			var oe *sdk.Error
			require.ErrorAs(t, err, &oe)
			assert.Equal(t, tt.status, oe.StatusCode)
			assert.NotEmpty(t, oe.Message)
			assert.NotEmpty(t, oe.Response.Header.Get("x-request-id"))
			if tt.fault == fakeprovider.FaultRateLimit {
				assert.Equal(t, "rate_limit_exceeded", oe.Code)
				assert.NotEmpty(t, oe.Response.Header.Get("retry-after-ms"))
				assert.Equal(t, "0", oe.Response.Header.Get("x-ratelimit-remaining-requests"))
			}
			assert.Equal(t, tt.fault, s.Truth().Requests[id].Attempts[0].Outcome)
		})
	}

	t.Run("timeout stalls unbilled", func(t *testing.T) {
		id := fpt.FindRequest(t, s.Plan(), "oai-stall", fakeprovider.FaultBilledTimeout)
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		_, err := c.Chat.Completions.New(ctx, fakeParams(), fakeOpts(id, 0)...)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		rt := s.Truth().Requests[id]
		assert.Equal(t, fakeprovider.FaultTimeout, rt.Attempts[0].Outcome)
		assert.True(t, rt.Billed.IsZero())
	})
}

// The API's own paths, with the server's root as the origin: a chat
// stream with its usage chunk, responses whole and streamed, embeddings.
func TestFakeEndpointsAtTheRoot(t *testing.T) {
	s := fpt.Listen(t, fakeprovider.Options{Seed: 9}, OpenAIFakeDialect())
	ctx := fpt.AttemptCtx(t)
	c := fakeClient(s.URL() + "/v1")

	params := fakeParams()
	params.StreamOptions = sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)}
	stream := c.Chat.Completions.NewStreaming(ctx, params, fakeOpts("root-chat", 0)...)
	var acc sdk.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	require.NoError(t, stream.Err())
	assert.Equal(t, s.PlannedUsage(Name, "root-chat"), UsageOf(acc.Usage))
	assert.Contains(t, acc.Choices[0].Message.Content, "root-chat")

	resp, err := c.Responses.New(ctx, fakeResponseParams(), fakeOpts("root-resp", 0)...)
	require.NoError(t, err)
	assert.Equal(t, s.PlannedUsage(Name, "root-resp"), ResponseUsageOf(resp.Usage))
	assert.Contains(t, resp.OutputText(), "root-resp")

	rs := c.Responses.NewStreaming(ctx, fakeResponseParams(), fakeOpts("root-resp-s", 0)...)
	var ru ResponseStreamUsage
	for rs.Next() {
		ru.Observe(rs.Current())
	}
	require.NoError(t, rs.Err())
	assert.True(t, ru.Complete())
	assert.Equal(t, s.PlannedUsage(Name, "root-resp-s"), ru.Usage())

	emb, err := c.Embeddings.New(ctx, sdk.EmbeddingNewParams{Model: "text-embedding-3-small", Input: sdk.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"a", "b"}}}, fakeOpts("root-emb", 0)...)
	require.NoError(t, err)
	require.Len(t, emb.Data, 2)
	assert.Len(t, emb.Data[1].Embedding, 8)
	assert.Equal(t, events.Usage{InputTokens: s.PlannedUsage(Name, "root-emb").InputTokens}, s.Truth().Requests["root-emb"].Billed, "an embedding bills its input only")
	assert.EqualValues(t, emb.Usage.PromptTokens, s.Truth().Requests["root-emb"].Billed.InputTokens)
}

// A chat stream without include_usage has no usage chunk, as the API.
func TestFakeStreamWithoutUsageChunk(t *testing.T) {
	s := fpt.Start(t, fakeprovider.Options{Seed: 9}, OpenAIFakeDialect())
	c := fakeClient(s.BaseURL(Name))
	stream := c.Chat.Completions.NewStreaming(fpt.AttemptCtx(t), fakeParams(), fakeOpts("no-usage", 0)...)
	var u StreamUsage
	for stream.Next() {
		u.Observe(stream.Current())
	}
	require.NoError(t, stream.Err())
	assert.False(t, u.Complete())
	assert.True(t, s.Truth().Requests["no-usage"].Succeeded)
}

// A broken stream bills its input and the tokens it streamed; the usage
// comes only at a stream's end, so what a client counts (StreamUsage,
// ResponseStreamUsage) is the content events, and the input is
// unobservable.
func TestFakeBrokenStreams(t *testing.T) {
	s := fpt.Start(t, fakeprovider.Options{Seed: 9, Mix: fakeprovider.Mix{RateLimit: 0.2, BrokenStream: 0.5}}, OpenAIFakeDialect())
	p := s.Plan()
	c := fakeClient(s.BaseURL(Name))
	ctx := context.Background()
	cases := []struct {
		name string
		call func(t *testing.T, id string) events.Usage // what the client counted
	}{
		{"chat", func(t *testing.T, id string) events.Usage {
			params := fakeParams()
			params.StreamOptions = sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)}
			stream := c.Chat.Completions.NewStreaming(ctx, params, fakeOpts(id, 0)...)
			var u StreamUsage
			for stream.Next() {
				u.Observe(stream.Current())
			}
			require.Error(t, stream.Err())
			return u.Usage()
		}},
		{"responses", func(t *testing.T, id string) events.Usage {
			stream := c.Responses.NewStreaming(ctx, fakeResponseParams(), fakeOpts(id, 0)...)
			var u ResponseStreamUsage
			for stream.Next() {
				u.Observe(stream.Current())
			}
			require.Error(t, stream.Err())
			return u.Usage()
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := fpt.FindRequest(t, p, "broken-"+tc.name, fakeprovider.FaultBrokenStream)
			counted := tc.call(t, id)
			a := s.Truth().Requests[id].Attempts[0]
			assert.Equal(t, fakeprovider.FaultBrokenStream, a.Outcome)
			full := s.PlannedUsage(Name, id)
			assert.Equal(t, full.InputTokens, a.Billed.InputTokens, "the input is billed")
			assert.Equal(t, p.BreakAfter(id, 0, full.OutputTokens), a.Billed.OutputTokens, "and the tokens streamed")
			unobservable := a.Billed
			unobservable.OutputTokens = 0
			assert.Equal(t, unobservable, a.Unobservable)
			assert.Equal(t, a.Billed.Sub(a.Unobservable), counted, "what the client counted is what is observable")
		})
	}
}

// An OpenAI-compatible provider's dialect: its own name and prefix, its
// error body, no rate-limit headers; OpenAI's SDK works against it, and
// the truth records the provider's name.
func TestFakeDialectOfACompatibleProvider(t *testing.T) {
	d := FakeDialect("ollama", FakeOptions{
		ErrorBody: func(e FakeError) any { return map[string]any{"error": e.Message} },
		Model:     "llama3.2",
	})
	require.NoError(t, d.Validate())
	s := fpt.Start(t, fakeprovider.Options{Seed: 42, Mix: fpt.Mix, Tier: fakeprovider.Tier{RequestsPerMinute: 600}}, OpenAIFakeDialect(), d)
	assert.Equal(t, s.URL()+"/ollama/v1/", s.BaseURL("ollama"))
	c := fakeClient(s.BaseURL("ollama"))

	id := fpt.FindRequest(t, s.Plan(), "oll-ok", fakeprovider.FaultNone)
	var raw *http.Response
	cc, err := c.Chat.Completions.New(fpt.AttemptCtx(t), fakeParams(), append(fakeOpts(id, 0), option.WithResponseInto(&raw))...)
	require.NoError(t, err)
	assert.Equal(t, s.PlannedUsage("ollama", id), UsageOf(cc.Usage))
	assert.Empty(t, raw.Header.Get("x-ratelimit-limit-requests"), "no rate-limit headers")
	assert.Equal(t, "ollama", s.Truth().Requests[id].Provider)

	id = fpt.FindRequest(t, s.Plan(), "oll-500", fakeprovider.FaultServerError)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.BaseURL("ollama")+"chat/completions", strings.NewReader(`{"model":"llama3.2","messages":[{"role":"user","content":"hi"}]}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer k")
	for k, v := range fpt.LedgerHeaders(id, 0) {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	var body map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	assert.Equal(t, map[string]any{"error": "The server had an error while processing your request."}, body, "the provider's own error body")

	// OpenAI's, on the same server, keeps its rate-limit headers.
	id = fpt.FindRequest(t, s.Plan(), "oai-ok", fakeprovider.FaultNone)
	oc := fakeClient(s.BaseURL(Name))
	_, err = oc.Chat.Completions.New(fpt.AttemptCtx(t), fakeParams(), append(fakeOpts(id, 0), option.WithResponseInto(&raw))...)
	require.NoError(t, err)
	assert.Equal(t, "600", raw.Header.Get("x-ratelimit-limit-requests"))
}

// The dialect's Sim drives the SDK against the fake provider.
func TestFakeSimCaller(t *testing.T) { fpt.CheckSim(t, OpenAIFakeDialect()) }

// A compatible Provider (New) offers its dialect: its name, its prefix,
// the rate-limit headers its guards read.
func TestFakeOfACompatibleProvider(t *testing.T) {
	limits := guard.RateLimitHeaders{{Dim: guard.Requests, Limit: "X-Ratelimit-Limit-Req-Minute", Remaining: "X-Ratelimit-Remaining-Req-Minute", Reset: "X-Ratelimit-Reset-Req-Minute"}}
	p := New("mistral", provider.Upstream{Origin: "https://api.mistral.ai"}, limits)
	d := p.Fake()
	assert.Equal(t, "mistral", d.Provider)
	assert.Equal(t, "/mistral", d.Prefix)
	assert.Equal(t, OpenAIFakeDialect().Prefix, Default.Fake().Prefix)

	s := fpt.Start(t, fakeprovider.Options{Seed: 42, Mix: fpt.Mix, Tier: fakeprovider.Tier{RequestsPerMinute: 600}}, d)
	id := fpt.FindRequest(t, s.Plan(), "mis-ok", fakeprovider.FaultNone)
	var raw *http.Response
	c := fakeClient(s.BaseURL("mistral"))
	_, err := c.Chat.Completions.New(fpt.AttemptCtx(t), fakeParams(), append(fakeOpts(id, 0), option.WithResponseInto(&raw))...)
	require.NoError(t, err)
	assert.Equal(t, "600", raw.Header.Get("X-Ratelimit-Limit-Req-Minute"))
	assert.Empty(t, raw.Header.Get("x-ratelimit-limit-requests"), "not OpenAI's names")
	obs := p.RateLimits(raw.Header, time.Now())
	assert.Equal(t, int64(600), obs.Limit[guard.Requests], "the guards read what the dialect sends")
}
