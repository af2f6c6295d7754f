package anthropic

import (
	"context"
	"fmt"
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
func newClient(t testing.TB, url string, extra ...option.RequestOption) sdk.Client {
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

// The errors that are not the SDK's are the conformance suite's
// (classify-invariants); a typed nil is this SDK's own trap.
func TestClassifyIgnoresTypedNil(t *testing.T) {
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
