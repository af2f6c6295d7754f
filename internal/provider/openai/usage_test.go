package openai

import (
	"context"
	"net/http"
	"testing"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/provider/providertest"
)

func TestUsageOfRealChatCompletion(t *testing.T) {
	tests := []struct {
		name  string
		usage string
		want  events.Usage
	}{
		{
			name:  "no details",
			usage: `{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29}`,
			want:  events.Usage{InputTokens: 19, OutputTokens: 10},
		},
		{
			name: "cached tokens are a subset of prompt tokens",
			usage: `{"prompt_tokens":2006,"completion_tokens":300,"total_tokens":2306,` +
				`"prompt_tokens_details":{"cached_tokens":1920,"audio_tokens":0},` +
				`"completion_tokens_details":{"reasoning_tokens":128,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`,
			want: events.Usage{InputTokens: 2006, OutputTokens: 300, CacheReadInputTokens: 1920, ReasoningTokens: 128},
		},
		{
			name:  "cache writes",
			usage: `{"prompt_tokens":5000,"completion_tokens":5,"total_tokens":5005,"prompt_tokens_details":{"cached_tokens":0,"cache_write_tokens":4096}}`,
			want:  events.Usage{InputTokens: 5000, OutputTokens: 5, CacheCreationInputTokens: 4096},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := providertest.Start(t, providertest.Reply{
				Status: 200,
				Header: map[string]string{"Content-Type": "application/json", RequestIDHeader: "req_ok"},
				Body: `{"id":"chatcmpl-1","object":"chat.completion","created":1741569952,"model":"gpt-test",` +
					`"choices":[{"index":0,"message":{"role":"assistant","content":"hi","refusal":null},"logprobs":null,"finish_reason":"stop"}],` +
					`"usage":` + tt.usage + `}`,
			})
			client := newClient(t, s.URL)
			var res *http.Response
			cc, err := client.Chat.Completions.New(context.Background(), newParams(), option.WithResponseInto(&res))
			require.NoError(t, err)
			assert.Equal(t, tt.want, UsageOf(cc.Usage))
			assert.Equal(t, "req_ok", RequestID(res.Header))
			assert.EqualValues(t, 1, s.Requests())
		})
	}
}

func TestUsageOfRealStreamLastChunk(t *testing.T) {
	body := `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}],"usage":null}` + "\n\n" +
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}` + "\n\n" +
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[],"usage":{"prompt_tokens":1200,"completion_tokens":8,"total_tokens":1208,"prompt_tokens_details":{"cached_tokens":1024}}}` + "\n\n" +
		"data: [DONE]\n\n"
	s := providertest.Start(t, providertest.Reply{Status: 200, Header: map[string]string{"Content-Type": "text/event-stream"}, Body: body})
	client := newClient(t, s.URL)
	params := newParams()
	params.StreamOptions = sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)}

	stream := client.Chat.Completions.NewStreaming(context.Background(), params)
	var acc sdk.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	require.NoError(t, stream.Err())
	require.NoError(t, stream.Close())
	assert.Equal(t, events.Usage{InputTokens: 1200, OutputTokens: 8, CacheReadInputTokens: 1024}, UsageOf(acc.Usage))
}

func TestResponseUsageOfRealResponse(t *testing.T) {
	s := providertest.Start(t, providertest.Reply{
		Status: 200,
		Header: map[string]string{"Content-Type": "application/json"},
		Body: `{"id":"resp_1","object":"response","created_at":1741476542,"status":"completed","model":"gpt-test","output":[],` +
			`"usage":{"input_tokens":3000,"input_tokens_details":{"cached_tokens":2048,"cache_write_tokens":512},` +
			`"output_tokens":400,"output_tokens_details":{"reasoning_tokens":320},"total_tokens":3400}}`,
	})
	client := newClient(t, s.URL)
	resp, err := client.Responses.New(context.Background(), responses.ResponseNewParams{
		Model: "gpt-test",
		Input: responses.ResponseNewParamsInputUnion{OfString: sdk.String("hello")},
	})
	require.NoError(t, err)
	assert.Equal(t, events.Usage{InputTokens: 3000, OutputTokens: 400, CacheReadInputTokens: 2048, CacheCreationInputTokens: 512, ReasoningTokens: 320}, ResponseUsageOf(resp.Usage))
	assert.EqualValues(t, 1, s.Requests())
}

// The SDK's chunks and events name the tier the wire readers take: the
// chat chunks each, a Responses stream its response.created and end event.
func TestStreamsTakeTheServiceTier(t *testing.T) {
	var chat, chatRaw StreamUsage
	for _, data := range []string{
		`{"id":"c","service_tier":"default","choices":[{"index":0,"delta":{"content":"Hi"}}],"usage":null}`,
		`{"id":"c","service_tier":"default","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":9,"completion_tokens_details":{"reasoning_tokens":7}}}`,
	} {
		var chunk sdk.ChatCompletionChunk
		require.NoError(t, chunk.UnmarshalJSON([]byte(data)))
		chat.Observe(chunk)
		_, err := chatRaw.ObserveRaw([]byte(data))
		require.NoError(t, err)
	}
	want := events.Usage{InputTokens: 5, OutputTokens: 9, ReasoningTokens: 7}
	assert.Equal(t, want, chat.Usage())
	assert.Equal(t, want, chatRaw.Usage())
	assert.Equal(t, "standard", chat.ServiceTier())
	assert.Equal(t, "standard", chatRaw.ServiceTier())

	var resp, respRaw ResponseStreamUsage
	for _, data := range []string{
		`{"type":"response.created","response":{"id":"r","service_tier":"priority","usage":null}}`,
		`{"type":"response.output_text.delta","delta":"Hi"}`,
	} {
		var ev responses.ResponseStreamEventUnion
		require.NoError(t, ev.UnmarshalJSON([]byte(data)))
		resp.Observe(ev)
		require.NoError(t, respRaw.ObserveRaw("", []byte(data)))
	}
	assert.Equal(t, "priority", resp.ServiceTier(), "known from response.created, before the usage")
	assert.Equal(t, "priority", respRaw.ServiceTier())
	assert.Equal(t, events.Usage{OutputTokens: 1}, resp.Usage())
}
