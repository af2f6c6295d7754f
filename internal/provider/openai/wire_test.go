package openai

import (
	"context"
	"testing"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/provider/providertest"
)

// ClassifyResponse of a raw error response equals Classify of the error
// the real SDK makes of the same response.
func TestClassifyResponseMatchesTheSDK(t *testing.T) {
	now := time.Now()
	for _, reply := range []providertest.Reply{
		{Status: 429, Header: jsonHeader("req_429", "Retry-After", "3"), Body: errorBody("requests", "rate_limit_exceeded", "slow down")},
		{Status: 429, Header: jsonHeader("req_reset", "X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "1.5s"), Body: errorBody("requests", "rate_limit_exceeded", "slow down")},
		{Status: 429, Header: jsonHeader("req_quota"), Body: errorBody("insufficient_quota", "insufficient_quota", "You exceeded your current quota")},
		{Status: 503, Header: jsonHeader("req_503"), Body: errorBody("server_error", "", "overloaded")},
		{Status: 502, Header: map[string]string{"Content-Type": "text/html"}, Body: "<html>bad gateway</html>"},
		{Status: 400, Header: jsonHeader("req_400"), Body: errorBody("invalid_request_error", "invalid_value", "messages: bad")},
	} {
		s := providertest.Start(t, reply)
		client := newClient(t, s.URL)
		_, err := client.Chat.Completions.New(context.Background(), newParams())
		require.Error(t, err)
		want, ok := Classify(err, now)
		require.True(t, ok)
		providertest.CheckWire(t, want, ClassifyResponse(reply.Status, reply.HTTPHeader(), []byte(reply.Body), now), reply)
	}
}

// Where the SDK gives up on a body ("error" is not an object), the status
// still classifies it.
func TestClassifyResponseOddBody(t *testing.T) {
	c := ClassifyResponse(500, nil, []byte(`{"error":"not an object"}`), time.Now())
	assert.Equal(t, events.KindServer, c.Kind)
	assert.True(t, c.Retryable)
	assert.Equal(t, 500, c.Status)
}

func TestClassifyStreamErrorShapes(t *testing.T) {
	chat := `{"error":{"message":"The server had an error","type":"server_error","code":null}}`
	want, _ := Classify(&ssestream.StreamError{Event: ssestream.Event{Data: []byte(chat)}}, time.Time{})
	assert.Equal(t, want, ClassifyStreamError([]byte(chat)), "a chat chunk is classified as the SDK's StreamError")
	assert.Equal(t, events.KindServer, want.Kind)

	ev := ClassifyStreamError([]byte(`{"type":"error","code":"rate_limit_exceeded","message":"slow down","param":null,"sequence_number":3}`))
	assert.Equal(t, events.KindRateLimit, ev.Kind)
	assert.Contains(t, ev.Message, "slow down")

	failed := ClassifyStreamError([]byte(`{"type":"response.failed","response":{"id":"resp_1","status":"failed","error":{"code":"server_error","message":"boom"}}}`))
	assert.Equal(t, events.KindServer, failed.Kind)
	assert.Contains(t, failed.Message, "boom")
}

func TestBodyUsages(t *testing.T) {
	u, ok := ChatUsage([]byte(`{"id":"c","usage":{"prompt_tokens":1200,"completion_tokens":8,"total_tokens":1208,"prompt_tokens_details":{"cached_tokens":1024}}}`))
	require.True(t, ok)
	assert.Equal(t, events.Usage{InputTokens: 1200, OutputTokens: 8, CacheReadInputTokens: 1024}, u)

	u, ok = EmbeddingUsage([]byte(`{"object":"list","data":[],"usage":{"prompt_tokens":42,"total_tokens":42}}`))
	require.True(t, ok)
	assert.Equal(t, events.Usage{InputTokens: 42}, u)

	u, ok = ResponseBodyUsage([]byte(`{"id":"r","usage":{"input_tokens":3000,"input_tokens_details":{"cached_tokens":2048,"cache_write_tokens":512},"output_tokens":400}}`))
	require.True(t, ok)
	assert.Equal(t, events.Usage{InputTokens: 3000, OutputTokens: 400, CacheReadInputTokens: 2048, CacheCreationInputTokens: 512}, u)

	for _, body := range []string{`{"id":"c"}`, `{"usage":null}`, `[`} {
		_, ok := ChatUsage([]byte(body))
		assert.False(t, ok, body)
	}
}

// chunks of a streamed chat completion: two content chunks, the finish
// chunk, the usage chunk and [DONE].
const (
	chunkHello = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}],"usage":null}` + "\n\n"
	chunkLo    = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}],"usage":null}` + "\n\n"
	chunkStop  = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}` + "\n\n"
	chunkUsage = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[],"usage":{"prompt_tokens":1200,"completion_tokens":2,"total_tokens":1202,"prompt_tokens_details":{"cached_tokens":1024}}}` + "\n\n"
)

// The adapter's fix: a chat stream that breaks before its usage chunk
// records the output it streamed, where the accumulator the SDK offers
// records nothing.
func TestStreamUsageOfRealStreams(t *testing.T) {
	tests := []struct {
		name     string
		reply    providertest.Reply
		want     events.Usage
		complete bool
		streamOK bool
	}{
		{
			name:     "whole stream",
			reply:    providertest.Reply{Header: map[string]string{"Content-Type": "text/event-stream"}, Body: chunkHello + chunkLo + chunkStop + chunkUsage + "data: [DONE]\n\n"},
			want:     events.Usage{InputTokens: 1200, OutputTokens: 2, CacheReadInputTokens: 1024},
			complete: true, streamOK: true,
		},
		{
			name:  "broken before the usage chunk",
			reply: providertest.Reply{Header: map[string]string{"Content-Type": "text/event-stream"}, Body: chunkHello + chunkLo, Fault: providertest.FaultTruncate},
			want:  events.Usage{OutputTokens: 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := providertest.Start(t, tt.reply)
			client := newClient(t, s.URL)
			params := newParams()
			params.StreamOptions = sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)}
			stream := client.Chat.Completions.NewStreaming(context.Background(), params)
			var usage StreamUsage
			var acc sdk.ChatCompletionAccumulator
			for stream.Next() {
				usage.Observe(stream.Current())
				acc.AddChunk(stream.Current())
			}
			assert.Equal(t, tt.streamOK, stream.Err() == nil, "stream error: %v", stream.Err())
			assert.Equal(t, tt.want, usage.Usage())
			assert.Equal(t, tt.complete, usage.Complete())
			if !tt.complete {
				assert.Zero(t, UsageOf(acc.Usage), "what the SDK's accumulator gives: nothing")
			}
		})
	}
}

func TestStreamUsageObserveRaw(t *testing.T) {
	var s StreamUsage
	for _, c := range []string{chunkHello, chunkLo, chunkStop} {
		only, err := s.ObserveRaw([]byte(c[len("data: ") : len(c)-2]))
		require.NoError(t, err)
		assert.False(t, only)
	}
	assert.Equal(t, events.Usage{OutputTokens: 2}, s.Usage())
	only, err := s.ObserveRaw([]byte(chunkUsage[len("data: ") : len(chunkUsage)-2]))
	require.NoError(t, err)
	assert.True(t, only, "the include_usage chunk")
	assert.True(t, s.Complete())
	assert.Equal(t, events.Usage{InputTokens: 1200, OutputTokens: 2, CacheReadInputTokens: 1024}, s.Usage())

	var tools StreamUsage
	_, err = tools.ObserveRaw([]byte(`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a"}}]}},{"delta":{"refusal":"no"}}]}`))
	require.NoError(t, err)
	assert.Equal(t, events.Usage{OutputTokens: 2}, tools.Usage(), "one per choice that carried content")
	_, err = tools.ObserveRaw([]byte(`{`))
	require.Error(t, err)
}

func TestResponseStreamUsage(t *testing.T) {
	var s ResponseStreamUsage
	require.NoError(t, s.ObserveRaw("response.created", []byte(`{"type":"response.created","response":{"id":"r","usage":null}}`)))
	require.NoError(t, s.ObserveRaw("response.output_text.delta", []byte(`{"type":"response.output_text.delta","delta":"Hi"}`)))
	require.NoError(t, s.ObserveRaw("", []byte(`{"type":"response.output_text.delta","delta":" there"}`)))
	require.NoError(t, s.ObserveRaw("response.audio.delta", []byte(`{"type":"response.audio.delta","delta":"AAAA"}`)))
	assert.Equal(t, events.Usage{OutputTokens: 2}, s.Usage())
	assert.False(t, s.Complete())
	require.NoError(t, s.ObserveRaw("response.completed", []byte(`{"type":"response.completed","response":{"id":"r","usage":{"input_tokens":30,"output_tokens":2,"input_tokens_details":{"cached_tokens":10}}}}`)))
	assert.True(t, s.Complete())
	assert.Equal(t, events.Usage{InputTokens: 30, OutputTokens: 2, CacheReadInputTokens: 10}, s.Usage())

	var sdkStream ResponseStreamUsage
	var ev responses.ResponseStreamEventUnion
	require.NoError(t, ev.UnmarshalJSON([]byte(`{"type":"response.output_text.delta","delta":"x","sequence_number":1}`)))
	sdkStream.Observe(ev)
	require.NoError(t, ev.UnmarshalJSON([]byte(`{"type":"response.completed","sequence_number":2,"response":{"id":"r","usage":{"input_tokens":5,"output_tokens":1,"input_tokens_details":{"cached_tokens":0},"output_tokens_details":{"reasoning_tokens":0},"total_tokens":6}}}`)))
	sdkStream.Observe(ev)
	assert.Equal(t, events.Usage{InputTokens: 5, OutputTokens: 1}, sdkStream.Usage())
}
