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
	"github.com/agentledger/ledger/internal/provider/openai/openaitest"
	"github.com/agentledger/ledger/internal/provider/providertest"
)

// A chat chunk's error is classified as the SDK's StreamError for it; the
// shapes of the stream's errors are the conformance suite's
// (openaitest.Features' StreamErrors).
func TestClassifyStreamErrorMatchesTheSDK(t *testing.T) {
	chat := `{"error":{"message":"The server had an error","type":"server_error","code":null}}`
	want, _ := Classify(&ssestream.StreamError{Event: ssestream.Event{Data: []byte(chat)}}, time.Time{})
	assert.Equal(t, want, ClassifyStreamError([]byte(chat)))
}

// sse is one server-sent event of data.
func sse(data string) string { return "data: " + data + "\n\n" }

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
			reply:    providertest.Reply{Header: map[string]string{"Content-Type": "text/event-stream"}, Body: sse(openaitest.ChunkHello) + sse(openaitest.ChunkLo) + sse(openaitest.ChunkStop) + sse(openaitest.ChunkUsage) + sse("[DONE]")},
			want:     events.Usage{InputTokens: 1200, OutputTokens: 2, CacheReadInputTokens: 1024},
			complete: true, streamOK: true,
		},
		{
			name:  "broken before the usage chunk",
			reply: providertest.Reply{Header: map[string]string{"Content-Type": "text/event-stream"}, Body: sse(openaitest.ChunkHello) + sse(openaitest.ChunkLo), Fault: providertest.FaultTruncate},
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

// The SDK's events give what the raw ones give (openaitest.Features'
// Responses stream).
func TestResponseStreamUsageOfSDKEvents(t *testing.T) {
	var sdkStream ResponseStreamUsage
	var ev responses.ResponseStreamEventUnion
	require.NoError(t, ev.UnmarshalJSON([]byte(`{"type":"response.output_text.delta","delta":"x","sequence_number":1}`)))
	sdkStream.Observe(ev)
	require.NoError(t, ev.UnmarshalJSON([]byte(`{"type":"response.completed","sequence_number":2,"response":{"id":"r","usage":{"input_tokens":5,"output_tokens":1,"input_tokens_details":{"cached_tokens":0},"output_tokens_details":{"reasoning_tokens":0},"total_tokens":6}}}`)))
	sdkStream.Observe(ev)
	assert.Equal(t, events.Usage{InputTokens: 5, OutputTokens: 1}, sdkStream.Usage())
}
