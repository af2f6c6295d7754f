package anthropic

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
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
		option.WithAPIKey("sk-ant-test"),
		option.WithHTTPClient(hc),
	}, extra...)
	return sdk.NewClient(append(opts, ClientOptions()...)...)
}

func newParams() sdk.MessageNewParams {
	return sdk.MessageNewParams{
		Model:     "claude-test",
		MaxTokens: 64,
		Messages:  []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("hello"))},
	}
}

// errorBody is an Anthropic error response body.
func errorBody(typ, msg string) string {
	return fmt.Sprintf(`{"type":"error","error":{"type":%q,"message":%q},"request_id":"req_body"}`, typ, msg)
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
		name  string
		reply providertest.Reply
		// opts are extra client options.
		opts []option.RequestOption
		// attemptTimeout bounds the attempt's context, which is derived from
		// the caller's; callerTimeout bounds the caller's own.
		attemptTimeout, callerTimeout time.Duration
		apiError                      bool // the SDK returns a *anthropic.Error
		want                          providertest.Want
		messageLacks                  string
	}{
		{
			name:     "429 with retry-after",
			reply:    providertest.Reply{Status: 429, Header: jsonHeader("req_429", "Retry-After", "7"), Body: errorBody("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit")},
			apiError: true,
			want:     providertest.Want{Kind: events.KindRateLimit, Status: 429, Retryable: true, Hint: 7 * time.Second, HasHint: true, ProviderRequestID: "req_429", MessageContains: "429 Too Many Requests: rate_limit_error: Number of request tokens"},
		},
		{
			name:     "429 with retry-after-ms",
			reply:    providertest.Reply{Status: 429, Header: jsonHeader("req_429ms", "Retry-After", "7", "Retry-After-Ms", "250"), Body: errorBody("rate_limit_error", "slow down")},
			apiError: true,
			want:     providertest.Want{Kind: events.KindRateLimit, Status: 429, Retryable: true, Hint: 250 * time.Millisecond, HasHint: true, ProviderRequestID: "req_429ms"},
		},
		{
			name:     "429 ramp limit",
			reply:    providertest.Reply{Status: 429, Header: jsonHeader("req_ramp", "Retry-After", "3"), Body: `{"type":"error","error":{"type":"rate_limit_error","message":"ramp","details":{"error_code":"ramp_limit_exceeded"}}}`},
			apiError: true,
			want:     providertest.Want{Kind: events.KindRateLimit, Status: 429, Retryable: true, Hint: 3 * time.Second, HasHint: true, ProviderRequestID: "req_ramp"},
		},
		{
			name:     "529 overloaded",
			reply:    providertest.Reply{Status: 529, Header: jsonHeader("req_529"), Body: errorBody("overloaded_error", "Overloaded")},
			apiError: true,
			want:     providertest.Want{Kind: events.KindOverloaded, Status: 529, Retryable: true, ProviderRequestID: "req_529", MessageContains: "529: overloaded_error: Overloaded"},
		},
		{
			name:     "500 api error",
			reply:    providertest.Reply{Status: 500, Header: jsonHeader("req_500"), Body: errorBody("api_error", "Internal server error")},
			apiError: true,
			want:     providertest.Want{Kind: events.KindServer, Status: 500, Retryable: true, ProviderRequestID: "req_500", MessageContains: "api_error"},
		},
		{
			name:         "503 with an HTML body",
			reply:        providertest.Reply{Status: 503, Header: map[string]string{"Content-Type": "text/html"}, Body: "<html><body>upstream connect error</body></html>"},
			apiError:     true,
			want:         providertest.Want{Kind: events.KindOverloaded, Status: 503, Retryable: true, MessageContains: "503 Service Unavailable"},
			messageLacks: "<html>",
		},
		{
			name:     "504 timeout error",
			reply:    providertest.Reply{Status: 504, Header: jsonHeader("req_504"), Body: errorBody("timeout_error", "Request timed out")},
			apiError: true,
			want:     providertest.Want{Kind: events.KindTimeout, Status: 504, Retryable: true, ProviderRequestID: "req_504"},
		},
		{
			name:     "409 conflict",
			reply:    providertest.Reply{Status: 409, Header: jsonHeader("req_409"), Body: errorBody("conflict_error", "conflict")},
			apiError: true,
			want:     providertest.Want{Kind: events.KindServer, Status: 409, Retryable: true, ProviderRequestID: "req_409"},
		},
		{
			name:     "400 invalid request",
			reply:    providertest.Reply{Status: 400, Header: jsonHeader("req_400"), Body: errorBody("invalid_request_error", "messages: field required")},
			apiError: true,
			want:     providertest.Want{Kind: events.KindClient, Status: 400, ProviderRequestID: "req_400", MessageContains: "invalid_request_error: messages: field required"},
		},
		{
			name:     "401 authentication",
			reply:    providertest.Reply{Status: 401, Header: jsonHeader("req_401"), Body: errorBody("authentication_error", "invalid x-api-key")},
			apiError: true,
			want:     providertest.Want{Kind: events.KindAuth, Status: 401, ProviderRequestID: "req_401"},
		},
		{
			name:     "403 permission",
			reply:    providertest.Reply{Status: 403, Header: jsonHeader("req_403"), Body: errorBody("permission_error", "not allowed")},
			apiError: true,
			want:     providertest.Want{Kind: events.KindAuth, Status: 403, ProviderRequestID: "req_403"},
		},
		{
			name:     "404 not found",
			reply:    providertest.Reply{Status: 404, Header: jsonHeader("req_404"), Body: errorBody("not_found_error", "model: claude-test")},
			apiError: true,
			want:     providertest.Want{Kind: events.KindClient, Status: 404, ProviderRequestID: "req_404"},
		},
		{
			name:     "413 request too large",
			reply:    providertest.Reply{Status: 413, Header: jsonHeader("req_413"), Body: errorBody("request_too_large", "Request exceeds the maximum allowed number of bytes")},
			apiError: true,
			want:     providertest.Want{Kind: events.KindClient, Status: 413, ProviderRequestID: "req_413"},
		},
		{
			name:     "400 credit balance too low",
			reply:    providertest.Reply{Status: 400, Header: jsonHeader("req_credit"), Body: errorBody("invalid_request_error", "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.")},
			apiError: true,
			want:     providertest.Want{Kind: events.KindQuota, Status: 400, ProviderRequestID: "req_credit", MessageContains: "credit balance is too low"},
		},
		{
			name:     "402 billing error",
			reply:    providertest.Reply{Status: 402, Header: jsonHeader("req_402"), Body: errorBody("billing_error", "billing")},
			apiError: true,
			want:     providertest.Want{Kind: events.KindQuota, Status: 402, ProviderRequestID: "req_402"},
		},
		{
			name: "429 spend limit is quota, even with x-should-retry true",
			reply: providertest.Reply{Status: 429, Header: jsonHeader("req_spend", "Retry-After", "60", "X-Should-Retry", "true"),
				Body: `{"type":"error","error":{"type":"rate_limit_error","message":"The organization has reached its spend limit","details":{"error_code":"enforced_spend_limit_reached"}}}`},
			apiError: true,
			want:     providertest.Want{Kind: events.KindQuota, Status: 429, Hint: time.Minute, HasHint: true, ProviderRequestID: "req_spend"},
		},
		{
			name:     "500 with x-should-retry false",
			reply:    providertest.Reply{Status: 500, Header: jsonHeader("req_nsr", "X-Should-Retry", "false"), Body: errorBody("api_error", "do not retry")},
			apiError: true,
			want:     providertest.Want{Kind: events.KindServer, Status: 500, ProviderRequestID: "req_nsr"},
		},
		{
			name:     "400 with x-should-retry true",
			reply:    providertest.Reply{Status: 400, Header: jsonHeader("req_sr", "X-Should-Retry", "true"), Body: errorBody("invalid_request_error", "transient")},
			apiError: true,
			want:     providertest.Want{Kind: events.KindClient, Status: 400, Retryable: true, ProviderRequestID: "req_sr"},
		},
		{
			name:     "long message is cut to 1 KiB",
			reply:    providertest.Reply{Status: 400, Header: jsonHeader("req_long"), Body: errorBody("invalid_request_error", strings.Repeat("é", 2000))},
			apiError: true,
			want:     providertest.Want{Kind: events.KindClient, Status: 400, ProviderRequestID: "req_long", MessageContains: "invalid_request_error: éé"},
		},
		{
			name:  "connection reset",
			reply: providertest.Reply{Fault: providertest.FaultReset},
			want:  providertest.Want{Kind: events.KindConnection, Retryable: true},
		},
		{
			name:  "response cut off mid-body",
			reply: providertest.Reply{Status: 200, Header: map[string]string{"Content-Type": "application/json"}, Body: `{"id":"msg_1","type":"mess`, Fault: providertest.FaultTruncate},
			want:  providertest.Want{Kind: events.KindConnection, Retryable: true, MessageContains: "unexpected EOF"},
		},
		{
			name:  "error response cut off mid-body",
			reply: providertest.Reply{Status: 500, Header: jsonHeader("req_cut"), Body: `{"type":"error","err`, Fault: providertest.FaultTruncate},
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

			_, err := client.Messages.New(ctx, newParams())
			require.Error(t, err)
			assert.EqualValues(t, 1, s.Requests(), "requests the server saw; more means the SDK retried")
			var ae *sdk.Error
			assert.Equal(t, tt.apiError, errors.As(err, &ae), "SDK error type: %T %v", err, err)

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
	s := providertest.Start(t, providertest.Reply{Status: 503, Header: jsonHeader("req_x", "Retry-After-Ms", "1"), Body: errorBody("overloaded_error", "busy")})
	client := sdk.NewClient(option.WithBaseURL(s.URL), option.WithAPIKey("sk-ant-test"))
	_, err := client.Messages.New(context.Background(), newParams())
	require.Error(t, err)
	assert.EqualValues(t, 3, s.Requests())
}

func TestClassifyStreamErrors(t *testing.T) {
	const start = "event: message_start\n" +
		`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":120,"output_tokens":1,"cache_read_input_tokens":3000,"cache_creation_input_tokens":400}}}` + "\n\n"
	const block = "event: content_block_start\n" +
		`data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
		"event: content_block_delta\n" +
		`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}` + "\n\n"
	sse := map[string]string{"Content-Type": "text/event-stream", RequestIDHeader: "req_stream"}
	billedInput := events.Usage{InputTokens: 3520, OutputTokens: 1, CacheReadInputTokens: 3000, CacheCreationInputTokens: 400}

	tests := []struct {
		name           string
		reply          providertest.Reply
		attemptTimeout time.Duration
		want           providertest.Want
		wantUsage      events.Usage
	}{
		{
			name: "overloaded error event after message_start",
			reply: providertest.Reply{Status: 200, Header: sse, Body: start + block + "event: error\n" +
				`data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}` + "\n\n"},
			want:      providertest.Want{Kind: events.KindOverloaded, Retryable: true, ProviderRequestID: "req_stream", MessageContains: "error event in stream: overloaded_error: Overloaded"},
			wantUsage: billedInput,
		},
		{
			name: "invalid request error event",
			reply: providertest.Reply{Status: 200, Header: sse, Body: start + "event: error\n" +
				`data: {"type":"error","error":{"type":"invalid_request_error","message":"bad"}}` + "\n\n"},
			want:      providertest.Want{Kind: events.KindClient, ProviderRequestID: "req_stream"},
			wantUsage: billedInput,
		},
		{
			name:           "timeout after message_start",
			reply:          providertest.Reply{Status: 200, Header: sse, Body: start + block, Fault: providertest.FaultHang},
			attemptTimeout: faultTimeout,
			want:           providertest.Want{Kind: events.KindTimeout, Retryable: true},
			wantUsage:      billedInput,
		},
		{
			name:      "stream cut off after message_start",
			reply:     providertest.Reply{Status: 200, Header: sse, Body: start, Fault: providertest.FaultTruncate},
			want:      providertest.Want{Kind: events.KindConnection, Retryable: true},
			wantUsage: billedInput,
		},
		{
			name:  "529 before the stream starts",
			reply: providertest.Reply{Status: 529, Header: jsonHeader("req_s529"), Body: errorBody("overloaded_error", "Overloaded")},
			want:  providertest.Want{Kind: events.KindOverloaded, Status: 529, Retryable: true, ProviderRequestID: "req_s529"},
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

			stream := client.Messages.NewStreaming(ctx, newParams())
			var su StreamUsage
			var acc sdk.Message
			for stream.Next() {
				ev := stream.Current()
				su.Observe(ev)
				require.NoError(t, acc.Accumulate(ev))
			}
			err := stream.Err()
			require.NoError(t, stream.Close())
			require.Error(t, err)
			assert.EqualValues(t, 1, s.Requests())

			got, ok := providertest.Classify(callerCtx, retry.Chain{Classifier}, err, time.Now())
			require.True(t, ok, "unclassified: %T %v", err, err)
			t.Logf("SDK error %T; message %q", err, got.Message)
			providertest.Check(t, got, tt.want)
			assert.Equal(t, tt.wantUsage, su.Usage(), "stream usage")
			assert.Equal(t, tt.wantUsage, UsageOf(acc.Usage), "usage of the accumulated message")
		})
	}
}

func TestClassifyIgnoresOtherErrors(t *testing.T) {
	for _, err := range []error{
		io.EOF,
		context.DeadlineExceeded,
		errors.New("anthropic: something"),
		fmt.Errorf("wrapped: %w", io.ErrUnexpectedEOF),
	} {
		_, ok := Classify(err, time.Now())
		assert.False(t, ok, "%v", err)
	}
	var nilErr *sdk.Error
	_, ok := Classify(nilErr, time.Now())
	assert.False(t, ok, "typed nil")
}

func TestClassifyWrappedError(t *testing.T) {
	err := fmt.Errorf("attempt 2: %w", &sdk.Error{StatusCode: 502, RequestID: "req_w"})
	got, ok := Classify(err, time.Now())
	require.True(t, ok)
	providertest.Check(t, got, providertest.Want{Kind: events.KindServer, Status: 502, Retryable: true, ProviderRequestID: "req_w", MessageContains: "502 Bad Gateway"})
}

func TestRequestID(t *testing.T) {
	tests := []struct {
		name   string
		header http.Header
		want   string
	}{
		{"present", http.Header{"Request-Id": {"req_011"}}, "req_011"},
		{"absent", http.Header{}, ""},
		{"nil", nil, ""},
		{"too long", http.Header{"Request-Id": {strings.Repeat("r", events.MaxProviderReqID+1)}}, ""},
		{"not UTF-8", http.Header{"Request-Id": {"req_\xff"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, RequestID(tt.header))
		})
	}
}
