package gemini

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/provider/providertest"
	"github.com/agentledger/ledger/internal/retry"
)

// faultTimeout is the attempt timeout of the cases where the server hangs.
const faultTimeout = 50 * time.Millisecond

const model = "gemini-test"

// newClient returns a real SDK client for the fault server at url, with
// ClientConfig applied. hc nil means a plain http.Client; timeout, when
// set, is the SDK's per-request timeout (HTTPOptions.Timeout).
func newClient(t testing.TB, url string, hc *http.Client, timeout time.Duration) *genai.Client {
	t.Helper()
	if hc == nil {
		hc = &http.Client{}
	}
	t.Cleanup(hc.CloseIdleConnections)
	base := &genai.ClientConfig{
		APIKey:      "test-key",
		Backend:     genai.BackendGeminiAPI,
		HTTPClient:  hc,
		HTTPOptions: genai.HTTPOptions{BaseURL: url},
	}
	if timeout > 0 {
		base.HTTPOptions.Timeout = &timeout
	}
	c, err := genai.NewClient(context.Background(), ClientConfig(base))
	require.NoError(t, err)
	return c
}

// errorBody is a Gemini API error response body; details is a JSON array
// or "".
func errorBody(code int, status, msg, details string) string {
	if details == "" {
		return fmt.Sprintf(`{"error":{"code":%d,"message":%q,"status":%q}}`, code, msg, status)
	}
	return fmt.Sprintf(`{"error":{"code":%d,"message":%q,"status":%q,"details":%s}}`, code, msg, status, details)
}

var jsonHeader = map[string]string{"Content-Type": "application/json; charset=UTF-8"}

const (
	quotaMessage = "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits."
	perMinute    = `[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier","quotaDimensions":{"location":"global","model":"gemini-test"},"quotaValue":"10"}]},` +
		`{"@type":"type.googleapis.com/google.rpc.Help","links":[{"description":"Learn more about Gemini API quotas","url":"https://ai.google.dev/gemini-api/docs/rate-limits"}]},` +
		`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"33s"}]`
	perDay = `[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier","quotaValue":"50"}]},` +
		`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"17s"}]`
	errorInfoDaily = `[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"RATE_LIMIT_EXCEEDED","domain":"googleapis.com","metadata":{"quota_metric":"x/requests","quota_limit":"Gemini25ProRequestsPerDay"}}]`
)

// TestSDKRetriesWithRetryOptions is the control for the one-request
// assertions above: a client whose RetryOptions allow retries sends the
// request again, so the assertion does catch SDK retries.
func TestSDKRetriesWithRetryOptions(t *testing.T) {
	s := providertest.Start(t, providertest.Reply{Status: 503, Header: jsonHeader, Body: errorBody(503, "UNAVAILABLE", "busy", "")})
	attempts, zero := int32(3), 0.0
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey:  "test-key",
		Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: s.URL, RetryOptions: &genai.HTTPRetryOptions{
			Attempts: &attempts, InitialDelay: &zero, Jitter: &zero,
		}},
	})
	require.NoError(t, err)
	_, err = c.Models.GenerateContent(context.Background(), model, genai.Text("hello"), nil)
	require.Error(t, err)
	assert.EqualValues(t, 3, s.Requests())
}

func TestClassifyStreamErrors(t *testing.T) {
	const chunk = `data: {"candidates":[{"content":{"role":"model","parts":[{"text":"Hel"}]},"index":0}],"usageMetadata":{"promptTokenCount":900,"cachedContentTokenCount":600,"candidatesTokenCount":2,"totalTokenCount":902},"modelVersion":"gemini-test","responseId":"r1"}` + "\n\n"
	sse := map[string]string{"Content-Type": "text/event-stream"}
	partial := events.Usage{InputTokens: 900, OutputTokens: 2, CacheReadInputTokens: 600}
	tests := []struct {
		name           string
		reply          providertest.Reply
		attemptTimeout time.Duration
		apiError       bool
		want           providertest.Want
		wantUsage      events.Usage
	}{
		{
			name:      "error chunk midway",
			reply:     providertest.Reply{Status: 200, Header: sse, Body: chunk + `data: {"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}` + "\n\n"},
			apiError:  true,
			want:      providertest.Want{Kind: events.KindOverloaded, Status: 503, Retryable: true, MessageContains: "UNAVAILABLE: The model is overloaded."},
			wantUsage: partial,
		},
		{
			name:           "timeout midway",
			reply:          providertest.Reply{Status: 200, Header: sse, Body: chunk, Fault: providertest.FaultHang},
			attemptTimeout: faultTimeout,
			want:           providertest.Want{Kind: events.KindTimeout, Retryable: true},
			wantUsage:      partial,
		},
		{
			name:      "stream cut off midway",
			reply:     providertest.Reply{Status: 200, Header: sse, Body: chunk, Fault: providertest.FaultTruncate},
			want:      providertest.Want{Kind: events.KindConnection, Retryable: true},
			wantUsage: partial,
		},
		{
			name:     "429 before the stream starts",
			reply:    providertest.Reply{Status: 429, Header: jsonHeader, Body: errorBody(429, "RESOURCE_EXHAUSTED", quotaMessage, perMinute)},
			apiError: true,
			want:     providertest.Want{Kind: events.KindRateLimit, Status: 429, Retryable: true, Hint: 33 * time.Second, HasHint: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := providertest.Start(t, tt.reply)
			client := newClient(t, s.URL, nil, 0)
			callerCtx, ctx := context.Background(), context.Background()
			if tt.attemptTimeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(callerCtx, tt.attemptTimeout)
				defer cancel()
			}
			var su StreamUsage
			var err error
			for chunk, cerr := range client.Models.GenerateContentStream(ctx, model, genai.Text("hello"), GenerateContentConfig(nil)) {
				if cerr != nil {
					err = cerr
					break
				}
				su.Observe(chunk)
			}
			require.Error(t, err)
			assert.EqualValues(t, 1, s.Requests())
			var ae genai.APIError
			assert.Equal(t, tt.apiError, errors.As(err, &ae), "SDK error type: %T %v", err, err)

			got, ok := providertest.Classify(callerCtx, retry.Chain{Classifier}, err, time.Now())
			require.True(t, ok, "unclassified: %T %v", err, err)
			t.Logf("SDK error %T; message %q", err, got.Message)
			providertest.Check(t, got, tt.want)
			assert.Equal(t, tt.wantUsage, su.Usage())
		})
	}
}

// The errors that are not the SDK's are the conformance suite's
// (classify-invariants); a typed nil is this SDK's own trap.
func TestClassifyIgnoresTypedNil(t *testing.T) {
	var nilErr *genai.APIError
	_, ok := Classify(nilErr, time.Now())
	assert.False(t, ok, "typed nil")
}

func TestClassifyPointerAPIError(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", &genai.APIError{Code: 503, Status: "UNAVAILABLE", Message: "busy"})
	got, ok := Classify(err, time.Now())
	require.True(t, ok)
	providertest.Check(t, got, providertest.Want{Kind: events.KindOverloaded, Status: 503, Retryable: true, MessageContains: "busy"})
}

func TestReadDetails(t *testing.T) {
	tests := []struct {
		name    string
		details []map[string]any
		want    details
	}{
		{"none", nil, details{}},
		{"retry info", []map[string]any{{"@type": typeRetryInfo, "retryDelay": "1.5s"}}, details{retryDelay: 1500 * time.Millisecond, hasRetryDelay: true}},
		{"retry info without unit", []map[string]any{{"@type": typeRetryInfo, "retryDelay": "15"}}, details{}},
		{"negative retry info", []map[string]any{{"@type": typeRetryInfo, "retryDelay": "-1s"}}, details{}},
		{"huge retry info", []map[string]any{{"@type": typeRetryInfo, "retryDelay": "1e300s"}}, details{}},
		{"retry info of the wrong type", []map[string]any{{"@type": typeRetryInfo, "retryDelay": 15.0}}, details{}},
		{"per-minute quota", []map[string]any{{"@type": typeQuotaFailure, "violations": []any{map[string]any{"quotaId": "GenerateRequestsPerMinutePerProjectPerModel", "quotaValue": "10"}}}}, details{}},
		{"per-day quota", []map[string]any{{"@type": typeQuotaFailure, "violations": []any{map[string]any{"quotaId": "GenerateRequestsPerDayPerProjectPerModel"}}}}, details{terminalQuota: true}},
		{"zero quota as a number", []map[string]any{{"@type": typeQuotaFailure, "violations": []any{map[string]any{"quotaId": "InputTokensPerMinute", "quotaValue": 0.0}}}}, details{terminalQuota: true}},
		{"malformed violations", []map[string]any{{"@type": typeQuotaFailure, "violations": "nope"}}, details{}},
		{"daily error info", []map[string]any{{"@type": typeErrorInfo, "metadata": map[string]any{"quota_limit": "RequestsPerDay"}}}, details{terminalQuota: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, readDetails(tt.details))
		})
	}
}

func TestLimitZero(t *testing.T) {
	for msg, want := range map[string]bool{
		"limit: 0":                      true,
		"metric: x, limit: 0, model: y": true,
		"limit: 0\nPlease retry":        true,
		"limit: 05":                     false,
		"limit: 10, then limit: 0":      true,
		"limit: 00":                     false,
		"no limit here":                 false,
	} {
		assert.Equal(t, want, limitZero(msg), msg)
	}
}
