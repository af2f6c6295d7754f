package anthropic

import (
	"context"
	"net/http"
	"testing"
	"time"

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
		{Status: 429, Header: jsonHeader("req_429", "Retry-After", "7"), Body: errorBody("rate_limit_error", "slow down")},
		{Status: 429, Header: jsonHeader("req_ms", "Retry-After-Ms", "250"), Body: errorBody("rate_limit_error", "slow down")},
		{Status: 529, Header: jsonHeader("req_529"), Body: errorBody("overloaded_error", "Overloaded")},
		{Status: 500, Header: jsonHeader("req_500", "X-Should-Retry", "false"), Body: errorBody("api_error", "boom")},
		{Status: 503, Header: map[string]string{"Content-Type": "text/html"}, Body: "<html>upstream connect error</html>"},
		{Status: 400, Header: jsonHeader("req_400"), Body: errorBody("invalid_request_error", "Your credit balance is too low")},
		{Status: 402, Header: jsonHeader("req_402"), Body: errorBody("billing_error", "no credit")},
		{Status: 401, Header: jsonHeader("req_401"), Body: errorBody("authentication_error", "invalid x-api-key")},
	} {
		s := providertest.Start(t, reply)
		client := newClient(t, s.URL)
		_, err := client.Messages.New(context.Background(), newParams())
		require.Error(t, err)
		want, ok := Classify(err, now)
		require.True(t, ok)
		providertest.CheckWire(t, want, ClassifyResponse(reply.Status, reply.HTTPHeader(), []byte(reply.Body), now), reply)
	}
}

func TestClassifyStreamError(t *testing.T) {
	h := http.Header{}
	h.Set(RequestIDHeader, "req_s")
	c := ClassifyStreamError(h, []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`), time.Now())
	assert.Equal(t, events.KindOverloaded, c.Kind)
	assert.True(t, c.Retryable)
	assert.Zero(t, c.Status)
	assert.Equal(t, "req_s", c.ProviderRequestID)
	assert.Contains(t, c.Message, "error event in stream: overloaded_error: Overloaded")
}

func TestMessageUsageAddsTheCacheToTheInput(t *testing.T) {
	u, ok := MessageUsage([]byte(`{"id":"msg_1","type":"message","usage":{"input_tokens":120,"output_tokens":512,"cache_read_input_tokens":2034,"cache_creation_input_tokens":10}}`))
	require.True(t, ok)
	assert.Equal(t, events.Usage{InputTokens: 2164, OutputTokens: 512, CacheReadInputTokens: 2034, CacheCreationInputTokens: 10}, u)
	_, ok = MessageUsage([]byte(`{"type":"error"}`))
	assert.False(t, ok)
	_, ok = MessageUsage([]byte(`not json`))
	assert.False(t, ok)
}

// The raw events give what the SDK's events give, and a stream cut after
// message_start still yields the input and the output reported so far.
func TestStreamUsageObserveRaw(t *testing.T) {
	start := `{"type":"message_start","message":{"id":"m","usage":{"input_tokens":20,"output_tokens":1,"cache_read_input_tokens":100,"cache_creation_input_tokens":0}}}`
	var s StreamUsage
	require.NoError(t, s.ObserveRaw("message_start", []byte(start)))
	require.NoError(t, s.ObserveRaw("content_block_delta", []byte(`{"type":"content_block_delta","delta":{"type":"text_delta","text":"Hi"}}`)))
	assert.Equal(t, events.Usage{InputTokens: 120, OutputTokens: 1, CacheReadInputTokens: 100}, s.Usage(), "broken after message_start")

	require.NoError(t, s.ObserveRaw("", []byte(`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":57}}`)))
	assert.Equal(t, events.Usage{InputTokens: 120, OutputTokens: 57, CacheReadInputTokens: 100}, s.Usage(), "message_delta is cumulative")
	require.NoError(t, s.ObserveRaw("message_delta", []byte(`{"type":"message_delta","usage":{"output_tokens":60,"input_tokens":25}}`)))
	assert.Equal(t, events.Usage{InputTokens: 125, OutputTokens: 60, CacheReadInputTokens: 100}, s.Usage(), "a delta's input counts replace message_start's")
	require.Error(t, s.ObserveRaw("message_delta", []byte(`{`)))
}
