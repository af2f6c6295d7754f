package fakeprovider_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/agentledger/ledger/internal/events"
	panthropic "github.com/agentledger/ledger/internal/provider/anthropic"
	pgemini "github.com/agentledger/ledger/internal/provider/gemini"
	popenai "github.com/agentledger/ledger/internal/provider/openai"
	"github.com/agentledger/ledger/internal/sim/fakeprovider"
)

// brokenMix makes broken streams likely enough to find fast.
var brokenMix = fakeprovider.Mix{RateLimit: 0.2, BrokenStream: 0.5}

func listen(t *testing.T, mix fakeprovider.Mix) *fakeprovider.Server {
	t.Helper()
	s, err := fakeprovider.Listen("127.0.0.1:0", fakeprovider.Options{Seed: 9, Mix: mix})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

// The providers' own paths: every SDK works with the server's root as its
// provider's origin.
func TestListenServesTheProvidersPaths(t *testing.T) {
	s := listen(t, fakeprovider.Mix{})
	ctx := attemptCtx(t)

	ant := anthropic.NewClient(aoption.WithBaseURL(s.URL()), aoption.WithAPIKey("k"), aoption.WithMaxRetries(0))
	msg, err := ant.Messages.New(ctx, anthropicParams(), anthropicOpts("root-ant", 0)...)
	require.NoError(t, err)
	assert.Equal(t, s.Plan().Usage(fakeprovider.Anthropic, "root-ant"), anthropicUsage(msg.Usage))

	oai := openai.NewClient(ooption.WithBaseURL(s.URL()+"/v1"), ooption.WithAPIKey("k"), ooption.WithMaxRetries(0))
	want := s.Plan().Usage(fakeprovider.OpenAI, "root-chat")
	params := openaiParams()
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := oai.Chat.Completions.NewStreaming(ctx, params, openaiOpts("root-chat", 0)...)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	require.NoError(t, stream.Err())
	assert.Equal(t, want, popenai.UsageOf(acc.Usage))
	assert.Contains(t, acc.Choices[0].Message.Content, "root-chat")

	resp, err := oai.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-4.1-mini", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}, openaiOpts("root-resp", 0)...)
	require.NoError(t, err)
	assert.Equal(t, s.Plan().Usage(fakeprovider.OpenAI, "root-resp"), popenai.ResponseUsageOf(resp.Usage))
	assert.Contains(t, resp.OutputText(), "root-resp")

	rs := oai.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "gpt-4.1-mini", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}, openaiOpts("root-resp-s", 0)...)
	var ru popenai.ResponseStreamUsage
	for rs.Next() {
		ru.Observe(rs.Current())
	}
	require.NoError(t, rs.Err())
	assert.True(t, ru.Complete())
	assert.Equal(t, s.Plan().Usage(fakeprovider.OpenAI, "root-resp-s"), ru.Usage())

	emb, err := oai.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "text-embedding-3-small", Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"a", "b"}}}, openaiOpts("root-emb", 0)...)
	require.NoError(t, err)
	require.Len(t, emb.Data, 2)
	assert.Len(t, emb.Data[1].Embedding, 8)
	assert.Equal(t, events.Usage{InputTokens: s.Plan().Usage(fakeprovider.OpenAI, "root-emb").InputTokens}, s.Truth().Requests["root-emb"].Billed, "an embedding bills its input only")
	assert.EqualValues(t, emb.Usage.PromptTokens, s.Truth().Requests["root-emb"].Billed.InputTokens)

	gem, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: "k", Backend: genai.BackendGeminiAPI, HTTPOptions: genai.HTTPOptions{BaseURL: s.URL()}})
	require.NoError(t, err)
	g, err := gem.Models.GenerateContent(ctx, geminiModel, genai.Text("hi"), geminiConfig("root-gem", 0))
	require.NoError(t, err)
	assert.Equal(t, s.Plan().Usage(fakeprovider.Gemini, "root-gem"), geminiUsage(g.UsageMetadata))

	// The prefixed paths still work on a standalone server.
	prefixed := anthropicClient(s)
	_, err = prefixed.Messages.New(ctx, anthropicParams(), anthropicOpts("prefixed", 0)...)
	require.NoError(t, err)
}

// A chat stream without include_usage has no usage chunk, as the API.
func TestOpenAIStreamWithoutUsageChunk(t *testing.T) {
	s := listen(t, fakeprovider.Mix{})
	oai := openai.NewClient(ooption.WithBaseURL(s.URL()+"/v1"), ooption.WithAPIKey("k"), ooption.WithMaxRetries(0))
	stream := oai.Chat.Completions.NewStreaming(attemptCtx(t), openaiParams(), openaiOpts("no-usage", 0)...)
	var u popenai.StreamUsage
	for stream.Next() {
		u.Observe(stream.Current())
	}
	require.NoError(t, stream.Err())
	assert.False(t, u.Complete())
	assert.True(t, s.Truth().Requests["no-usage"].Succeeded)
}

// A broken stream bills its input and the tokens it streamed; what a client
// can count of it (the Go adapters' stream usage) is exactly Billed minus
// Unobservable.
func TestBrokenStreams(t *testing.T) {
	s := listen(t, brokenMix)
	p := s.Plan()
	ctx := context.Background()
	cases := []struct {
		name     string
		provider string
		call     func(t *testing.T, id string) events.Usage // what the client counted
		// unobservable says what the truth keeps out of reach, given billed.
		unobservable func(billed events.Usage) events.Usage
	}{
		{"anthropic", fakeprovider.Anthropic, func(t *testing.T, id string) events.Usage {
			c := anthropic.NewClient(aoption.WithBaseURL(s.URL()), aoption.WithAPIKey("k"), aoption.WithMaxRetries(0))
			stream := c.Messages.NewStreaming(ctx, anthropicParams(), anthropicOpts(id, 0)...)
			var u panthropic.StreamUsage
			for stream.Next() {
				u.Observe(stream.Current())
			}
			require.Error(t, stream.Err(), "the stream breaks")
			return u.Usage()
		}, func(b events.Usage) events.Usage { return events.Usage{OutputTokens: b.OutputTokens - 1} }},
		{"openai chat", fakeprovider.OpenAI, func(t *testing.T, id string) events.Usage {
			c := openai.NewClient(ooption.WithBaseURL(s.URL()+"/v1"), ooption.WithAPIKey("k"), ooption.WithMaxRetries(0))
			params := openaiParams()
			params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			stream := c.Chat.Completions.NewStreaming(ctx, params, openaiOpts(id, 0)...)
			var u popenai.StreamUsage
			for stream.Next() {
				u.Observe(stream.Current())
			}
			require.Error(t, stream.Err())
			return u.Usage()
		}, func(b events.Usage) events.Usage { b.OutputTokens = 0; return b }},
		{"openai responses", fakeprovider.OpenAI, func(t *testing.T, id string) events.Usage {
			c := openai.NewClient(ooption.WithBaseURL(s.URL()+"/v1"), ooption.WithAPIKey("k"), ooption.WithMaxRetries(0))
			stream := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "gpt-4.1-mini", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}, openaiOpts(id, 0)...)
			var u popenai.ResponseStreamUsage
			for stream.Next() {
				u.Observe(stream.Current())
			}
			require.Error(t, stream.Err())
			return u.Usage()
		}, func(b events.Usage) events.Usage { b.OutputTokens = 0; return b }},
		{"gemini", fakeprovider.Gemini, func(t *testing.T, id string) events.Usage {
			c, err := genai.NewClient(ctx, pgemini.ClientConfig(&genai.ClientConfig{APIKey: "k", Backend: genai.BackendGeminiAPI, HTTPOptions: genai.HTTPOptions{BaseURL: s.URL()}}))
			require.NoError(t, err)
			var u pgemini.StreamUsage
			var streamErr error
			for resp, err := range c.Models.GenerateContentStream(ctx, geminiModel, genai.Text("hi"), pgemini.GenerateContentConfig(geminiConfig(id, 0))) {
				if err != nil {
					streamErr = err
					break
				}
				u.Observe(resp)
			}
			require.Error(t, streamErr)
			return u.Usage()
		}, func(events.Usage) events.Usage { return events.Usage{} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := findRequest(t, p, "broken-"+strings.ReplaceAll(tc.name, " ", "-"), fakeprovider.FaultBrokenStream)
			counted := tc.call(t, id)
			rt := s.Truth().Requests[id]
			require.Len(t, rt.Attempts, 1)
			a := rt.Attempts[0]
			assert.Equal(t, fakeprovider.FaultBrokenStream, a.Outcome)
			full := p.Usage(tc.provider, id)
			assert.Equal(t, full.InputTokens, a.Billed.InputTokens, "the input is billed")
			assert.Equal(t, p.BreakAfter(id, 0, full.OutputTokens), a.Billed.OutputTokens, "and the tokens streamed")
			assert.Positive(t, a.Billed.OutputTokens)
			assert.Equal(t, tc.unobservable(a.Billed), a.Unobservable)
			assert.Equal(t, a.Billed.Sub(a.Unobservable), counted, "what the client counted is what is observable")
			assert.Equal(t, a.Unobservable, rt.Unobservable)
		})
	}
}

// A request that does not stream gets its connection cut before any answer,
// unbilled.
func TestBrokenStreamOnARequestThatDoesNotStream(t *testing.T) {
	s := listen(t, brokenMix)
	id := findRequest(t, s.Plan(), "disconnect", fakeprovider.FaultBrokenStream)
	req, err := http.NewRequest(http.MethodPost, s.URL()+"/v1/messages", strings.NewReader(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`))
	require.NoError(t, err)
	for k, v := range ledgerHeaders(id, 0) {
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
