package openai

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/provider/providertest"
	"github.com/agentledger/ledger/internal/retry"
)

// faultTimeout is the attempt timeout of the cases where the server hangs.
const faultTimeout = 50 * time.Millisecond

// newClient returns a real SDK client for the fault server at url, built
// with ClientOptions after any extra options.
func newClient(t testing.TB, url string, extra ...option.RequestOption) sdk.Client {
	t.Helper()
	hc := &http.Client{}
	t.Cleanup(hc.CloseIdleConnections)
	opts := append([]option.RequestOption{
		option.WithBaseURL(url),
		option.WithAPIKey("sk-test"),
		option.WithHTTPClient(hc),
	}, extra...)
	return sdk.NewClient(append(opts, ClientOptions()...)...)
}

func newParams() sdk.ChatCompletionNewParams {
	return sdk.ChatCompletionNewParams{
		Model:    "gpt-test",
		Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("hello")},
	}
}

// errorBody is an OpenAI error response body; code "" is sent as null.
func errorBody(typ, code, msg string) string {
	c := "null"
	if code != "" {
		c = fmt.Sprintf("%q", code)
	}
	return fmt.Sprintf(`{"error":{"message":%q,"type":%q,"param":null,"code":%s}}`, msg, typ, c)
}

// jsonHeader returns the headers of a JSON error response with a request id
// and the extra headers given as name, value pairs.
func jsonHeader(reqID string, kv ...string) map[string]string {
	h := map[string]string{"Content-Type": "application/json", RequestIDHeader: reqID}
	for i := 0; i+1 < len(kv); i += 2 {
		h[kv[i]] = kv[i+1]
	}
	return h
}

// TestSDKRetriesWithoutClientOptions is the control for the one-request
// assertions above: the same client without ClientOptions retries a 503
// twice, so the assertion does catch SDK retries.
func TestSDKRetriesWithoutClientOptions(t *testing.T) {
	s := providertest.Start(t, providertest.Reply{Status: 503, Header: jsonHeader("req_x", "Retry-After-Ms", "1"), Body: errorBody("server_error", "", "busy")})
	client := sdk.NewClient(option.WithBaseURL(s.URL), option.WithAPIKey("sk-test"))
	_, err := client.Chat.Completions.New(context.Background(), newParams())
	require.Error(t, err)
	assert.EqualValues(t, 3, s.Requests())
}

func TestClassifyStreamErrors(t *testing.T) {
	const chunk = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}` + "\n\n"
	sse := map[string]string{"Content-Type": "text/event-stream", RequestIDHeader: "req_stream"}
	tests := []struct {
		name           string
		reply          providertest.Reply
		attemptTimeout time.Duration
		streamError    bool // the SDK returns a *ssestream.StreamError
		want           providertest.Want
	}{
		{
			name:        "server error in the stream",
			reply:       providertest.Reply{Status: 200, Header: sse, Body: chunk + `data: {"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}` + "\n\n"},
			streamError: true,
			want:        providertest.Want{Kind: events.KindServer, Retryable: true, MessageContains: "error event in stream: server_error: The server had an error"},
		},
		{
			name:        "rate limit in the stream",
			reply:       providertest.Reply{Status: 200, Header: sse, Body: chunk + `data: {"error":{"message":"slow","type":"tokens","code":"rate_limit_exceeded"}}` + "\n\n"},
			streamError: true,
			want:        providertest.Want{Kind: events.KindRateLimit, Retryable: true},
		},
		{
			name:        "unknown error in the stream",
			reply:       providertest.Reply{Status: 200, Header: sse, Body: chunk + `data: {"error":{"message":"odd","type":"mystery","code":42}}` + "\n\n"},
			streamError: true,
			want:        providertest.Want{Kind: events.KindOther, MessageContains: "mystery: odd"},
		},
		{
			name:           "timeout midway",
			reply:          providertest.Reply{Status: 200, Header: sse, Body: chunk, Fault: providertest.FaultHang},
			attemptTimeout: faultTimeout,
			want:           providertest.Want{Kind: events.KindTimeout, Retryable: true},
		},
		{
			name:  "stream cut off midway",
			reply: providertest.Reply{Status: 200, Header: sse, Body: chunk, Fault: providertest.FaultTruncate},
			want:  providertest.Want{Kind: events.KindConnection, Retryable: true},
		},
		{
			name:  "429 before the stream starts",
			reply: providertest.Reply{Status: 429, Header: jsonHeader("req_s429", "Retry-After", "1"), Body: errorBody("requests", "rate_limit_exceeded", "slow")},
			want:  providertest.Want{Kind: events.KindRateLimit, Status: 429, Retryable: true, Hint: time.Second, HasHint: true, ProviderRequestID: "req_s429"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := providertest.Start(t, tt.reply)
			client := newClient(t, s.URL)
			callerCtx, ctx := context.Background(), context.Background()
			if tt.attemptTimeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(callerCtx, tt.attemptTimeout)
				defer cancel()
			}
			stream := client.Chat.Completions.NewStreaming(ctx, newParams())
			for stream.Next() {
			}
			err := stream.Err()
			_ = stream.Close()
			require.Error(t, err)
			assert.EqualValues(t, 1, s.Requests())
			var se *ssestream.StreamError
			assert.Equal(t, tt.streamError, errors.As(err, &se), "SDK error type: %T %v", err, err)

			got, ok := providertest.Classify(callerCtx, retry.Chain{Classifier}, err, time.Now())
			require.True(t, ok, "unclassified: %T %v", err, err)
			t.Logf("SDK error %T; message %q", err, got.Message)
			providertest.Check(t, got, tt.want)
		})
	}
}

// The errors that are not the SDK's are the conformance suite's
// (classify-invariants); a typed nil is this SDK's own trap.
func TestClassifyIgnoresTypedNil(t *testing.T) {
	var nilErr *sdk.Error
	_, ok := Classify(nilErr, time.Now())
	assert.False(t, ok, "typed nil")
}

func TestRateLimitReset(t *testing.T) {
	tests := []struct {
		name   string
		header http.Header
		want   time.Duration
		ok     bool
	}{
		{"nil", nil, 0, false},
		{"nothing exhausted", http.Header{"X-Ratelimit-Remaining-Requests": {"3"}, "X-Ratelimit-Reset-Requests": {"1s"}}, 0, false},
		{"requests exhausted", http.Header{"X-Ratelimit-Remaining-Requests": {"0"}, "X-Ratelimit-Reset-Requests": {"20ms"}}, 20 * time.Millisecond, true},
		{"both exhausted takes the longer", http.Header{
			"X-Ratelimit-Remaining-Requests": {"0"}, "X-Ratelimit-Reset-Requests": {"1.5s"},
			"X-Ratelimit-Remaining-Tokens": {"0"}, "X-Ratelimit-Reset-Tokens": {"900ms"},
		}, 1500 * time.Millisecond, true},
		{"unparseable reset", http.Header{"X-Ratelimit-Remaining-Tokens": {"0"}, "X-Ratelimit-Reset-Tokens": {"soon"}}, 0, false},
		{"negative reset", http.Header{"X-Ratelimit-Remaining-Tokens": {"0"}, "X-Ratelimit-Reset-Tokens": {"-1s"}}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, ok := RateLimitReset(tt.header)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, d)
		})
	}
}

func TestRequestID(t *testing.T) {
	tests := []struct {
		name   string
		header http.Header
		want   string
	}{
		{"present", http.Header{"X-Request-Id": {"req_abc"}}, "req_abc"},
		{"absent", http.Header{}, ""},
		{"nil", nil, ""},
		{"too long", http.Header{"X-Request-Id": {strings.Repeat("r", events.MaxProviderReqID+1)}}, ""},
		{"not UTF-8", http.Header{"X-Request-Id": {"req_\xff"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, RequestID(tt.header))
		})
	}
}
