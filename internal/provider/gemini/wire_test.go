package gemini

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/provider/providertest"
)

// ClassifyResponse of a raw error response equals Classify of the error
// the real SDK makes of the same response.
func TestClassifyResponseMatchesTheSDK(t *testing.T) {
	for _, reply := range []providertest.Reply{
		{Status: 429, Header: jsonHeader, Body: errorBody(429, "RESOURCE_EXHAUSTED", quotaMessage, perMinute)},
		{Status: 429, Header: jsonHeader, Body: errorBody(429, "RESOURCE_EXHAUSTED", quotaMessage, perDay)},
		{Status: 503, Header: jsonHeader, Body: errorBody(503, "UNAVAILABLE", "The model is overloaded.", "")},
		{Status: 500, Header: jsonHeader, Body: errorBody(500, "INTERNAL", "An internal error has occurred.", "")},
		{Status: 400, Header: jsonHeader, Body: errorBody(400, "INVALID_ARGUMENT", "Request contains an invalid argument.", "")},
		{Status: 502, Header: map[string]string{"Content-Type": "text/html"}, Body: "<html>bad gateway</html>"},
		{Status: 404, Header: jsonHeader, Body: `{"other":1}`},
	} {
		s := providertest.Start(t, reply)
		_, err := newClient(t, s.URL, nil, 0).Models.GenerateContent(context.Background(), "gemini-test", genai.Text("hi"), GenerateContentConfig(nil))
		require.Error(t, err)
		want, ok := Classify(err, time.Time{})
		require.True(t, ok, "%v", err)
		got := ClassifyResponse(reply.Status, []byte(reply.Body))
		assert.Equal(t, want, got, "status %d %s", reply.Status, reply.Body)
	}
}

func TestStreamError(t *testing.T) {
	c, ok := StreamError([]byte(`{"error":{"code":500,"message":"An internal error has occurred.","status":"INTERNAL"}}`))
	require.True(t, ok)
	assert.Equal(t, events.KindServer, c.Kind)
	assert.True(t, c.Retryable)
	_, ok = StreamError([]byte(`{"candidates":[{"content":{"parts":[{"text":"an \"error\" word"}]}}]}`))
	assert.False(t, ok)
}

func TestResponseUsage(t *testing.T) {
	one := `{"candidates":[],"usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":20,"cachedContentTokenCount":40,"toolUsePromptTokenCount":5,"thoughtsTokenCount":7},"responseId":"resp-1"}`
	u, id, ok := ResponseUsage([]byte(one))
	require.True(t, ok)
	assert.Equal(t, events.Usage{InputTokens: 105, OutputTokens: 27, CacheReadInputTokens: 40}, u)
	assert.Equal(t, "resp-1", id)

	array := `[{"usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":1},"responseId":"r"},{"usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":9}},{"candidates":[]}]`
	u, id, ok = ResponseUsage([]byte(array))
	require.True(t, ok)
	assert.Equal(t, events.Usage{InputTokens: 100, OutputTokens: 9}, u, "the last chunk with usage counts")
	assert.Equal(t, "r", id)

	_, _, ok = ResponseUsage([]byte(`{"candidates":[]}`))
	assert.False(t, ok)
}

func TestStreamUsageObserveRaw(t *testing.T) {
	var s StreamUsage
	id, err := s.ObserveRaw([]byte(`{"candidates":[{"content":{"parts":[{"text":"Hi"}]}}],"usageMetadata":{"promptTokenCount":50,"candidatesTokenCount":1},"responseId":"abc"}`))
	require.NoError(t, err)
	assert.Equal(t, "abc", id)
	assert.Equal(t, events.Usage{InputTokens: 50, OutputTokens: 1}, s.Usage())
	_, err = s.ObserveRaw([]byte(`{"candidates":[{"content":{"parts":[{"text":" there"}]}}],"usageMetadata":{"promptTokenCount":50,"candidatesTokenCount":2}}`))
	require.NoError(t, err)
	assert.Equal(t, events.Usage{InputTokens: 50, OutputTokens: 2}, s.Usage(), "the latest running total replaces the earlier")
	_, err = s.ObserveRaw([]byte(`nope`))
	require.Error(t, err)
}
