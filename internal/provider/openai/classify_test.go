package openai

import (
	"context"
	"errors"
	"fmt"
	"io"
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
func newClient(t *testing.T, url string, extra ...option.RequestOption) sdk.Client {
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

func TestClassifyRealClientErrors(t *testing.T) {
	hang := providertest.Reply{Fault: providertest.FaultHang}
	tests := []struct {
		name                          string
		reply                         providertest.Reply
		opts                          []option.RequestOption
		attemptTimeout, callerTimeout time.Duration
		apiError                      bool // the SDK returns a *openai.Error
		want                          providertest.Want
		messageLacks                  string
	}{
		{
			name:     "429 with retry-after",
			reply:    providertest.Reply{Status: 429, Header: jsonHeader("req_429", "Retry-After", "2"), Body: errorBody("requests", "rate_limit_exceeded", "Rate limit reached for gpt-test on requests per min (RPM)")},
			apiError: true,
			want:     providertest.Want{Kind: events.KindRateLimit, Status: 429, Retryable: true, Hint: 2 * time.Second, HasHint: true, ProviderRequestID: "req_429", MessageContains: "429 Too Many Requests: rate_limit_exceeded: Rate limit reached"},
		},
		{
			name:     "429 with retry-after-ms",
			reply:    providertest.Reply{Status: 429, Header: jsonHeader("req_429ms", "Retry-After", "2", "Retry-After-Ms", "1500"), Body: errorBody("tokens", "rate_limit_exceeded", "slow down")},
			apiError: true,
			want:     providertest.Want{Kind: events.KindRateLimit, Status: 429, Retryable: true, Hint: 1500 * time.Millisecond, HasHint: true, ProviderRequestID: "req_429ms"},
		},
		{
			name: "429 hint from the exhausted limit's reset",
			reply: providertest.Reply{Status: 429, Header: jsonHeader("req_reset",
				"X-Ratelimit-Remaining-Requests", "12", "X-Ratelimit-Reset-Requests", "1s",
				"X-Ratelimit-Remaining-Tokens", "0", "X-Ratelimit-Reset-Tokens", "6m0s"),
				Body: errorBody("tokens", "rate_limit_exceeded", "Rate limit reached on tokens per min (TPM)")},
			apiError: true,
			want:     providertest.Want{Kind: events.KindRateLimit, Status: 429, Retryable: true, Hint: 6 * time.Minute, HasHint: true, ProviderRequestID: "req_reset"},
		},
		{
			name: "429 insufficient quota",
			reply: providertest.Reply{Status: 429, Header: jsonHeader("req_quota"),
				Body: errorBody("insufficient_quota", "insufficient_quota", "You exceeded your current quota, please check your plan and billing details.")},
			apiError: true,
			want:     providertest.Want{Kind: events.KindQuota, Status: 429, ProviderRequestID: "req_quota", MessageContains: "insufficient_quota: You exceeded your current quota"},
		},
		{
			name:     "400 billing hard limit",
			reply:    providertest.Reply{Status: 400, Header: jsonHeader("req_hard"), Body: errorBody("invalid_request_error", "billing_hard_limit_reached", "Billing hard limit has been reached")},
			apiError: true,
			want:     providertest.Want{Kind: events.KindQuota, Status: 400, ProviderRequestID: "req_hard"},
		},
		{
			name:     "429 quota is not retried even with x-should-retry true",
			reply:    providertest.Reply{Status: 429, Header: jsonHeader("req_q2", "X-Should-Retry", "true"), Body: errorBody("insufficient_quota", "", "quota")},
			apiError: true,
			want:     providertest.Want{Kind: events.KindQuota, Status: 429, ProviderRequestID: "req_q2"},
		},
		{
			name:     "500 server error",
			reply:    providertest.Reply{Status: 500, Header: jsonHeader("req_500"), Body: errorBody("server_error", "", "The server had an error while processing your request.")},
			apiError: true,
			want:     providertest.Want{Kind: events.KindServer, Status: 500, Retryable: true, ProviderRequestID: "req_500", MessageContains: "500 Internal Server Error: server_error: The server had an error"},
		},
		{
			name:         "502 with an HTML body",
			reply:        providertest.Reply{Status: 502, Header: map[string]string{"Content-Type": "text/html", RequestIDHeader: "req_502"}, Body: "<html><body><h1>502 Bad Gateway</h1></body></html>"},
			apiError:     true,
			want:         providertest.Want{Kind: events.KindServer, Status: 502, Retryable: true, ProviderRequestID: "req_502", MessageContains: "502 Bad Gateway"},
			messageLacks: "<html>",
		},
		{
			name:     "503 overloaded",
			reply:    providertest.Reply{Status: 503, Header: jsonHeader("req_503"), Body: errorBody("server_error", "", "The engine is currently overloaded, please try again later")},
			apiError: true,
			want:     providertest.Want{Kind: events.KindOverloaded, Status: 503, Retryable: true, ProviderRequestID: "req_503"},
		},
		{
			name:     "400 invalid request",
			reply:    providertest.Reply{Status: 400, Header: jsonHeader("req_400"), Body: errorBody("invalid_request_error", "context_length_exceeded", "This model's maximum context length is 128000 tokens.")},
			apiError: true,
			want:     providertest.Want{Kind: events.KindClient, Status: 400, ProviderRequestID: "req_400", MessageContains: "context_length_exceeded"},
		},
		{
			name:     "401 invalid key",
			reply:    providertest.Reply{Status: 401, Header: jsonHeader("req_401"), Body: errorBody("invalid_request_error", "invalid_api_key", "Incorrect API key provided")},
			apiError: true,
			want:     providertest.Want{Kind: events.KindAuth, Status: 401, ProviderRequestID: "req_401"},
		},
		{
			name:     "403 unsupported region",
			reply:    providertest.Reply{Status: 403, Header: jsonHeader("req_403"), Body: errorBody("request_forbidden", "unsupported_country_region_territory", "Country, region, or territory not supported")},
			apiError: true,
			want:     providertest.Want{Kind: events.KindAuth, Status: 403, ProviderRequestID: "req_403"},
		},
		{
			name:     "404 model not found",
			reply:    providertest.Reply{Status: 404, Header: jsonHeader("req_404"), Body: errorBody("invalid_request_error", "model_not_found", "The model does not exist")},
			apiError: true,
			want:     providertest.Want{Kind: events.KindClient, Status: 404, ProviderRequestID: "req_404"},
		},
		{
			name:     "422 unprocessable",
			reply:    providertest.Reply{Status: 422, Header: jsonHeader("req_422"), Body: errorBody("invalid_request_error", "", "unprocessable")},
			apiError: true,
			want:     providertest.Want{Kind: events.KindClient, Status: 422, ProviderRequestID: "req_422"},
		},
		{
			name:     "500 with x-should-retry false",
			reply:    providertest.Reply{Status: 500, Header: jsonHeader("req_nsr", "X-Should-Retry", "false"), Body: errorBody("server_error", "", "no")},
			apiError: true,
			want:     providertest.Want{Kind: events.KindServer, Status: 500, ProviderRequestID: "req_nsr"},
		},
		{
			name:     "400 with x-should-retry true",
			reply:    providertest.Reply{Status: 400, Header: jsonHeader("req_sr", "X-Should-Retry", "true"), Body: errorBody("invalid_request_error", "", "transient")},
			apiError: true,
			want:     providertest.Want{Kind: events.KindClient, Status: 400, Retryable: true, ProviderRequestID: "req_sr"},
		},
		{
			name:     "long message is cut to 1 KiB",
			reply:    providertest.Reply{Status: 400, Header: jsonHeader("req_long"), Body: errorBody("invalid_request_error", "", strings.Repeat("ü", 3000))},
			apiError: true,
			want:     providertest.Want{Kind: events.KindClient, Status: 400, ProviderRequestID: "req_long"},
		},
		{
			name:  "connection reset",
			reply: providertest.Reply{Fault: providertest.FaultReset},
			want:  providertest.Want{Kind: events.KindConnection, Retryable: true},
		},
		{
			name:  "response cut off mid-body",
			reply: providertest.Reply{Status: 200, Header: map[string]string{"Content-Type": "application/json"}, Body: `{"id":"chatcmpl-1","obj`, Fault: providertest.FaultTruncate},
			want:  providertest.Want{Kind: events.KindConnection, Retryable: true, MessageContains: "unexpected EOF"},
		},
		{
			name:  "error response cut off mid-body",
			reply: providertest.Reply{Status: 500, Header: jsonHeader("req_cut"), Body: `{"error":{"mess`, Fault: providertest.FaultTruncate},
			want:  providertest.Want{Kind: events.KindConnection, Retryable: true},
		},
		{
			name:           "attempt timeout (context)",
			reply:          hang,
			attemptTimeout: faultTimeout,
			want:           providertest.Want{Kind: events.KindTimeout, Retryable: true},
		},
		{
			name:  "attempt timeout (SDK request timeout)",
			reply: hang,
			opts:  []option.RequestOption{option.WithRequestTimeout(faultTimeout)},
			want:  providertest.Want{Kind: events.KindTimeout, Retryable: true},
		},
		{
			name:  "http client timeout",
			reply: hang,
			opts:  []option.RequestOption{option.WithHTTPClient(&http.Client{Timeout: faultTimeout})},
			want:  providertest.Want{Kind: events.KindTimeout, Retryable: true},
		},
		{
			name:          "caller's deadline is not retried",
			reply:         hang,
			callerTimeout: faultTimeout,
			want:          providertest.Want{Kind: events.KindCanceled},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := providertest.Start(t, tt.reply)
			client := newClient(t, s.URL, tt.opts...)
			callerCtx, ctx := context.Background(), context.Background()
			if tt.callerTimeout > 0 {
				var cancel context.CancelFunc
				callerCtx, cancel = context.WithTimeout(callerCtx, tt.callerTimeout)
				defer cancel()
				ctx = callerCtx
			}
			if tt.attemptTimeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(callerCtx, tt.attemptTimeout)
				defer cancel()
			}

			_, err := client.Chat.Completions.New(ctx, newParams())
			require.Error(t, err)
			assert.EqualValues(t, 1, s.Requests(), "requests the server saw; more means the SDK retried")
			var oe *sdk.Error
			assert.Equal(t, tt.apiError, errors.As(err, &oe), "SDK error type: %T %v", err, err)

			got, ok := providertest.Classify(callerCtx, retry.Chain{Classifier}, err, time.Now())
			require.True(t, ok, "unclassified: %T %v", err, err)
			t.Logf("SDK error %T; message %q", err, got.Message)
			providertest.Check(t, got, tt.want)
			if tt.messageLacks != "" {
				assert.NotContains(t, got.Message, tt.messageLacks)
			}
		})
	}
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

func TestClassifyIgnoresOtherErrors(t *testing.T) {
	for _, err := range []error{
		io.EOF,
		context.DeadlineExceeded,
		errors.New("openai: something"),
		fmt.Errorf("wrapped: %w", io.ErrUnexpectedEOF),
	} {
		_, ok := Classify(err, time.Now())
		assert.False(t, ok, "%v", err)
	}
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
