package gemini

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/provider/providertest"
)

func TestUsageOfRealResponse(t *testing.T) {
	tests := []struct {
		name  string
		usage string
		want  events.Usage
		total int64
	}{
		{
			name:  "plain",
			usage: `{"promptTokenCount":12,"candidatesTokenCount":30,"totalTokenCount":42}`,
			want:  events.Usage{InputTokens: 12, OutputTokens: 30},
			total: 42,
		},
		{
			name: "cached content, thoughts and tool use",
			usage: `{"promptTokenCount":1200,"cachedContentTokenCount":1000,"candidatesTokenCount":50,"thoughtsTokenCount":300,` +
				`"toolUsePromptTokenCount":20,"totalTokenCount":1570,"promptTokensDetails":[{"modality":"TEXT","tokenCount":1200}]}`,
			want:  events.Usage{InputTokens: 1220, OutputTokens: 350, CacheReadInputTokens: 1000, ReasoningTokens: 300},
			total: 1570,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := providertest.Start(t, providertest.Reply{
				Status: 200,
				Header: jsonHeader,
				Body: `{"candidates":[{"content":{"role":"model","parts":[{"text":"hi"}]},"finishReason":"STOP","index":0}],` +
					`"usageMetadata":` + tt.usage + `,"modelVersion":"gemini-test","responseId":"resp-abc"}`,
			})
			client := newClient(t, s.URL, nil, 0)
			resp, err := client.Models.GenerateContent(context.Background(), model, genai.Text("hello"), GenerateContentConfig(nil))
			require.NoError(t, err)
			got := UsageOf(resp)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.total, got.InputTokens+got.OutputTokens, "input + output is totalTokenCount")
			assert.Equal(t, "resp-abc", RequestID(resp))
			assert.EqualValues(t, 1, s.Requests())
		})
	}
}

func TestUsageOfNil(t *testing.T) {
	assert.True(t, UsageOf(nil).IsZero())
	assert.True(t, UsageOf(&genai.GenerateContentResponse{}).IsZero())
	assert.True(t, MetadataUsage(nil).IsZero())
	assert.Empty(t, RequestID(nil))
	var su StreamUsage
	su.Observe(nil)
	su.Observe(&genai.GenerateContentResponse{})
	assert.True(t, su.Usage().IsZero())
}

func TestStreamUsageOfCompleteStream(t *testing.T) {
	body := `data: {"candidates":[{"content":{"role":"model","parts":[{"text":"Hel"}]},"index":0}],"usageMetadata":{"promptTokenCount":80,"candidatesTokenCount":1,"totalTokenCount":81},"responseId":"r1"}` + "\n\n" +
		`data: {"candidates":[{"content":{"role":"model","parts":[{"text":"lo"}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":80,"candidatesTokenCount":9,"thoughtsTokenCount":40,"totalTokenCount":129},"responseId":"r1"}` + "\n\n"
	s := providertest.Start(t, providertest.Reply{Status: 200, Header: map[string]string{"Content-Type": "text/event-stream"}, Body: body})
	client := newClient(t, s.URL, nil, 0)
	var su StreamUsage
	for chunk, err := range client.Models.GenerateContentStream(context.Background(), model, genai.Text("hello"), GenerateContentConfig(nil)) {
		require.NoError(t, err)
		su.Observe(chunk)
	}
	assert.Equal(t, events.Usage{InputTokens: 80, OutputTokens: 49, ReasoningTokens: 40}, su.Usage())
	assert.EqualValues(t, 1, s.Requests())
}

// continuationBody is a response the server says must be continued: the
// SDK's automatic continuation would send the request again with its token.
const continuationBody = `{"candidates":[{"content":{"role":"model","parts":[{"text":"part"}]},"finishReason":"CONTINUATION","continuationToken":"dG9rZW4=","index":0}],` +
	`"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":5,"totalTokenCount":15}}`

func TestGenerateContentConfigStopsContinuation(t *testing.T) {
	s := providertest.Start(t, providertest.Reply{Status: 200, Header: jsonHeader, Body: continuationBody})
	client := newClient(t, s.URL, nil, 0)
	resp, err := client.Models.GenerateContent(context.Background(), model, genai.Text("hello"), GenerateContentConfig(nil))
	require.NoError(t, err)
	assert.EqualValues(t, 1, s.Requests())
	require.NotEmpty(t, resp.Candidates)
	assert.Equal(t, []byte("token"), resp.Candidates[0].ContinuationToken, "the caller gets the token to continue itself")
	assert.Equal(t, events.Usage{InputTokens: 10, OutputTokens: 5}, UsageOf(resp))
}

// TestContinuationSendsMoreRequests is the control: with the SDK's default
// config the same response makes the SDK send the request again (here
// until the attempt's deadline, since the fake server always answers the
// same token).
func TestContinuationSendsMoreRequests(t *testing.T) {
	s := providertest.Start(t, providertest.Reply{Status: 200, Header: jsonHeader, Body: continuationBody})
	client := newClient(t, s.URL, nil, 0)
	ctx, cancel := context.WithTimeout(context.Background(), faultTimeout)
	defer cancel()
	_, _ = client.Models.GenerateContent(ctx, model, genai.Text("hello"), nil)
	assert.Greater(t, s.Requests(), int64(1))
}

// TestStreamReconnectStopped shows the stream side: a stream that drops
// after a checkpoint token is reconnected by the SDK by default, and is not
// with GenerateContentConfig.
func TestStreamReconnectStopped(t *testing.T) {
	body := `data: {"candidates":[{"content":{"role":"model","parts":[{"text":"Hel"}]},"continuationToken":"Y2twdA==","index":0}],"usageMetadata":{"promptTokenCount":7,"candidatesTokenCount":1,"totalTokenCount":8}}` + "\n\n"
	tests := []struct {
		name     string
		config   func() *genai.GenerateContentConfig
		requests int64
	}{
		{"adapter config", func() *genai.GenerateContentConfig { return GenerateContentConfig(nil) }, 1},
		{"SDK default", func() *genai.GenerateContentConfig { return nil }, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := providertest.Start(t, providertest.Reply{Status: 200, Header: map[string]string{"Content-Type": "text/event-stream"}, Body: body, Fault: providertest.FaultTruncate})
			client := newClient(t, s.URL, nil, 0)
			var err error
			for _, cerr := range client.Models.GenerateContentStream(context.Background(), model, genai.Text("hello"), tt.config()) {
				if cerr != nil {
					err = cerr
				}
			}
			require.Error(t, err)
			assert.EqualValues(t, tt.requests, s.Requests())
		})
	}
}

func TestClientConfigCopies(t *testing.T) {
	attempts := int32(5)
	timeout := time.Second
	base := &genai.ClientConfig{
		APIKey: "k",
		HTTPOptions: genai.HTTPOptions{
			BaseURL:      "http://x",
			Headers:      http.Header{"X-A": {"1"}},
			Timeout:      &timeout,
			RetryOptions: &genai.HTTPRetryOptions{Attempts: &attempts},
		},
	}
	cc := ClientConfig(base)
	require.NotNil(t, cc.HTTPOptions.RetryOptions)
	assert.EqualValues(t, 1, *cc.HTTPOptions.RetryOptions.Attempts)
	assert.Equal(t, "k", cc.APIKey)
	assert.Equal(t, "http://x", cc.HTTPOptions.BaseURL)
	assert.Equal(t, &timeout, cc.HTTPOptions.Timeout)
	cc.HTTPOptions.Headers.Set("X-A", "2")
	assert.Equal(t, "1", base.HTTPOptions.Headers.Get("X-A"), "base headers untouched")
	assert.EqualValues(t, 5, *base.HTTPOptions.RetryOptions.Attempts, "base retry options untouched")

	assert.EqualValues(t, 1, *ClientConfig(nil).HTTPOptions.RetryOptions.Attempts)
}

func TestGenerateContentConfigCopies(t *testing.T) {
	on := true
	attempts := int32(4)
	base := &genai.GenerateContentConfig{
		AutomaticContinuation: &on,
		HTTPOptions:           &genai.HTTPOptions{Headers: http.Header{"X-B": {"1"}}, RetryOptions: &genai.HTTPRetryOptions{Attempts: &attempts}},
	}
	cfg := GenerateContentConfig(base)
	require.NotNil(t, cfg.AutomaticContinuation)
	assert.False(t, *cfg.AutomaticContinuation)
	assert.True(t, *base.AutomaticContinuation, "base untouched")
	assert.EqualValues(t, 1, *cfg.HTTPOptions.RetryOptions.Attempts)
	assert.EqualValues(t, 4, *base.HTTPOptions.RetryOptions.Attempts, "base untouched")
	cfg.HTTPOptions.Headers.Set("X-B", "2")
	assert.Equal(t, "1", base.HTTPOptions.Headers.Get("X-B"))

	plain := GenerateContentConfig(nil)
	assert.Nil(t, plain.HTTPOptions, "no request HTTPOptions: the client's apply")
	assert.False(t, *plain.AutomaticContinuation)
}
