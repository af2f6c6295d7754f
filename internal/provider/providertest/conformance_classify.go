package providertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/provider"
	"github.com/agentledger/ledger/internal/retry"
)

// faultTimeout is the attempt (or caller's) timeout of the SDK fault
// scenarios where the server hangs.
const faultTimeout = 50 * time.Millisecond

func classifyResponse(t suiteT, p provider.Provider, status int, h http.Header, body []byte) (c retry.Classification) {
	t.Helper()
	noPanic(t, fmt.Sprintf("ClassifyResponse(%d, %s)", status, describe(body)), func() { c = p.ClassifyResponse(status, h, body, Now) })
	return c
}

// testStreamErrors checks ClassifyStreamError on the Features' error
// events.
func testStreamErrors(t suiteT, p provider.Provider, f *Features) {
	for _, sc := range f.StreamErrors {
		t.Run(sc.Name, func(t suiteT) {
			var c retry.Classification
			if noPanic(t, "ClassifyStreamError", func() { c = p.ClassifyStreamError(header(sc.Header), []byte(sc.Data), Now) }) {
				Check(t, c, sc.Want)
			}
		})
	}
}

// testResponses checks ClassifyResponse on the Features' error
// responses.
func testResponses(t suiteT, p provider.Provider, f *Features) {
	required(t, "Responses", len(f.Responses))
	for _, rc := range f.Responses {
		t.Run(rc.Name, func(t suiteT) {
			if rc.Reply.Fault != FaultNone {
				t.Fatalf("Features.Responses are whole responses; the suite's SDK scenarios cover the faults")
			}
			Check(t, classifyResponse(t, p, rc.Reply.Status, rc.Reply.HTTPHeader(), []byte(rc.Reply.Body)), rc.Want)
		})
	}
}

// sdkCall serves reply, makes one call with the provider's SDK and
// returns its error, checking that the SDK sent exactly one request (more
// means it retried on its own, and the ledger would miss attempts).
func sdkCall(t suiteT, f *Features, ctx context.Context, reply Reply) error {
	t.Helper()
	s := Start(t, reply)
	hc := &http.Client{}
	t.Cleanup(hc.CloseIdleConnections)
	err := f.SDK.Call(ctx, t, s.URL, hc)
	require.Error(t, err, "the SDK's call to a server answering %d %s", reply.Status, reply.Body)
	assert.EqualValues(t, 1, s.Requests(), "requests the server saw; more means the SDK retried on its own")
	return err
}

// testSDKResponses serves each of the Features' error responses to the
// provider's SDK: Classifier recognises the SDK's error and classifies it
// as the table says, and as ClassifyResponse classifies the raw response.
func testSDKResponses(t suiteT, p provider.Provider, f *Features) {
	required(t, "Responses", len(f.Responses))
	for _, rc := range f.Responses {
		t.Run(rc.Name, func(t suiteT) {
			err := sdkCall(t, f, context.Background(), rc.Reply)
			got, ok := p.Classifier().Classify(err, Now)
			require.True(t, ok, "Classifier does not recognise its SDK's error %T %v", err, err)
			if rc.SDKWant != nil {
				Check(t, got, *rc.SDKWant)
				return
			}
			Check(t, got, rc.Want)
			CheckWire(t, got, classifyResponse(t, p, rc.Reply.Status, rc.Reply.HTTPHeader(), []byte(rc.Reply.Body)), rc.Reply)
		})
	}
}

// testSDKFaults checks the classification of the SDK's errors for the
// faults every provider's SDK meets: a reset connection, a response cut
// off, an attempt that times out and a caller who gives up. Classifier
// leaves them to retry.ClassifyTransport, as the middleware's chain does.
func testSDKFaults(t suiteT, p provider.Provider, f *Features) {
	hang := Reply{Fault: FaultHang}
	jsonHeader := map[string]string{"Content-Type": "application/json"}
	for _, tc := range []struct {
		name                          string
		reply                         Reply
		attemptTimeout, callerTimeout time.Duration
		want                          Want
	}{
		{name: "connection reset", reply: Reply{Fault: FaultReset}, want: Want{Kind: events.KindConnection, Retryable: true}},
		{name: "response cut off mid-body", reply: Reply{Status: 200, Header: jsonHeader, Body: `{"id":"x","obj`, Fault: FaultTruncate},
			want: Want{Kind: events.KindConnection, Retryable: true, MessageContains: "unexpected EOF"}},
		{name: "error response cut off mid-body", reply: Reply{Status: 500, Header: jsonHeader, Body: `{"error":{"mess`, Fault: FaultTruncate},
			want: Want{Kind: events.KindConnection, Retryable: true}},
		{name: "attempt timeout", reply: hang, attemptTimeout: faultTimeout, want: Want{Kind: events.KindTimeout, Retryable: true}},
		{name: "caller's deadline is not retried", reply: hang, callerTimeout: faultTimeout, want: Want{Kind: events.KindCanceled}},
	} {
		t.Run(tc.name, func(t suiteT) {
			callerCtx, ctx := context.Background(), context.Background()
			if tc.callerTimeout > 0 {
				var cancel context.CancelFunc
				callerCtx, cancel = context.WithTimeout(callerCtx, tc.callerTimeout)
				defer cancel()
				ctx = callerCtx
			}
			if tc.attemptTimeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(callerCtx, tc.attemptTimeout)
				defer cancel()
			}
			err := sdkCall(t, f, ctx, tc.reply)
			got, ok := Classify(callerCtx, p.Classifier(), err, Now)
			require.True(t, ok, "unclassified: %T %v", err, err)
			Check(t, got, tc.want)
		})
	}
}

// testSDKTimeouts checks the timeouts of the SDK's HTTP client and, when
// it has one, of its own request timeout option, against a server that
// hangs: each is a timeout, retried, and the SDK sent one request.
func testSDKTimeouts(t suiteT, p provider.Provider, f *Features) {
	for _, tc := range []struct {
		name string
		call func(ctx context.Context, t testing.TB, baseURL string, d time.Duration) error
	}{
		{"http client timeout", func(ctx context.Context, t testing.TB, baseURL string, d time.Duration) error {
			hc := &http.Client{Timeout: d}
			t.Cleanup(hc.CloseIdleConnections)
			return f.SDK.Call(ctx, t, baseURL, hc)
		}},
		{"SDK request timeout", f.SDK.RequestTimeout},
	} {
		t.Run(tc.name, func(t suiteT) {
			if tc.call == nil {
				t.Skip("the SDK has no request timeout of its own (Features.SDK.RequestTimeout is nil)")
			}
			s := Start(t, Reply{Fault: FaultHang})
			err := tc.call(context.Background(), t, s.URL, faultTimeout)
			require.Error(t, err, "the SDK's call to a server that hangs")
			assert.EqualValues(t, 1, s.Requests(), "requests the server saw; more means the SDK retried on its own")
			got, ok := Classify(context.Background(), p.Classifier(), err, Now)
			require.True(t, ok, "unclassified: %T %v", err, err)
			Check(t, got, Want{Kind: events.KindTimeout, Retryable: true})
		})
	}
}

// notProviderErrors are errors no provider's classifier may claim: they
// are retry.ClassifyTransport's.
var notProviderErrors = []error{
	nil,
	io.EOF,
	io.ErrUnexpectedEOF,
	context.DeadlineExceeded,
	context.Canceled,
	errors.New("something failed"),
	fmt.Errorf("wrapped: %w", io.ErrUnexpectedEOF),
	&url.Error{Op: "Post", URL: "http://127.0.0.1:1/v1", Err: errors.New("connection refused")},
}

// testClassifyInvariants checks what every provider's classification
// does. ClassifyResponse never panics and gives a valid kind and a
// message that fits the contract for any status from 100 to 599; for an
// error status whose body the provider cannot read, it keeps the status
// and follows the contract's status rule (retry.StatusKind: a 429 and a
// 500, 502, 503 or 504 are retried, a 400 is not), and keeps the body out
// of the message. ClassifyStreamError never panics, and gives a valid
// kind and a status that is 0 or an HTTP status, whatever the data.
// Classifier leaves the errors that are not its SDK's to the transport.
func testClassifyInvariants(t suiteT, p provider.Provider, f *Features) {
	bodies := append(notJSONBytes(), []byte(nil), []byte("null"), []byte("[]"), []byte(`{"error":null}`), []byte(`{"error":"text"}`))
	for status := 100; status <= 599; status++ {
		for i, b := range bodies {
			var h http.Header
			if i%2 == 1 {
				h = http.Header{"Content-Type": {"application/json"}}
			}
			c := classifyResponse(t, p, status, h, b)
			if !c.Kind.Valid() {
				t.Errorf("ClassifyResponse(%d, %s): kind %q is not one of the contract's", status, describe(b), c.Kind)
			}
			checkMessage(t, c.Message, "ClassifyResponse(%d, %s)", status, describe(b))
			if status < 400 {
				continue
			}
			kind, retryable := retry.StatusKind(status)
			if c.Status != status || c.Kind != kind || c.Retryable != retryable {
				t.Errorf("ClassifyResponse(%d, %s) = status %d, %s, retryable %v; a body the provider cannot read leaves the status rule: %s, retryable %v",
					status, describe(b), c.Status, c.Kind, c.Retryable, kind, retryable)
			}
			if c.Message == "" {
				t.Errorf("ClassifyResponse(%d, %s): no message", status, describe(b))
			}
			if strings.Contains(c.Message, "<html>") {
				t.Errorf("ClassifyResponse(%d, %s): the raw body is in the message %q", status, describe(b), c.Message)
			}
		}
	}

	var streamData [][]byte
	for _, sc := range f.StreamErrors {
		streamData = append(streamData, []byte(sc.Data))
	}
	for _, d := range append(mangled(streamData, oddJSON), append(notJSONBytes(), garbage(8)...)...) {
		var c retry.Classification
		noPanic(t, "ClassifyStreamError("+describe(d)+")", func() { c = p.ClassifyStreamError(nil, d, Now) })
		if !c.Kind.Valid() {
			t.Errorf("ClassifyStreamError(%s): kind %q is not one of the contract's", describe(d), c.Kind)
		}
		if c.Status != 0 && (c.Status < 100 || c.Status > 599) {
			t.Errorf("ClassifyStreamError(%s): status %d is neither 0 nor an HTTP status", describe(d), c.Status)
		}
		checkMessage(t, c.Message, "ClassifyStreamError(%s)", describe(d))
	}

	cl := p.Classifier()
	if !assert.NotNil(t, cl, "Classifier") {
		return
	}
	for _, err := range notProviderErrors {
		var ok bool
		noPanic(t, fmt.Sprintf("Classifier().Classify(%v)", err), func() { _, ok = cl.Classify(err, Now) })
		assert.False(t, ok, "Classifier claims %T %v, which is the transport's", err, err)
	}
}

// checkMessage fails t when msg does not fit the contract's message.
func checkMessage(t suiteT, msg string, format string, args ...any) {
	t.Helper()
	if len(msg) > events.MaxMessageBytes || !utf8.ValidString(msg) {
		t.Errorf("%s: message %q does not fit the contract (UTF-8, at most %d bytes)", fmt.Sprintf(format, args...), msg, events.MaxMessageBytes)
	}
}

// gatewayMessage is the message of the error bodies the suite asks for:
// quotes, markup and a non-ASCII letter, which the body must carry
// escaped and intact.
const gatewayMessage = `circuit "open" for <upstream> \ é`

// errorBody calls p.ErrorBody, failing t rather than panicking.
func errorBody(t suiteT, p provider.Provider, status int, msg string) (b []byte) {
	t.Helper()
	noPanic(t, fmt.Sprintf("ErrorBody(%d)", status), func() { b = p.ErrorBody(status, msg) })
	return b
}

// testErrorBodies checks the error bodies the gateway makes for each
// status it answers with: each is the provider's own error (Parse reads
// it and finds the message), and ClassifyResponse reads it back as the
// status and the kind the table says.
func testErrorBodies(t suiteT, p provider.Provider, f *Features) {
	required(t, "ErrorBodies.Kinds", len(f.ErrorBodies.Kinds))
	if f.ErrorBodies.Parse == nil {
		t.Fatalf("Features.ErrorBodies.Parse is nil: every provider says how its errors are read")
	}
	for _, status := range sortedStatuses(f.ErrorBodies.Kinds) {
		body := errorBody(t, p, status, gatewayMessage)
		msg, err := f.ErrorBodies.Parse(body)
		if assert.NoError(t, err, "ErrorBody(%d) = %s is not the provider's error", status, body) {
			assert.Equal(t, gatewayMessage, msg, "ErrorBody(%d) = %s: the error's message", status, body)
		}
		c := classifyResponse(t, p, status, http.Header{"Content-Type": {"application/json"}}, body)
		assert.Equal(t, status, c.Status, "ClassifyResponse(%d, ErrorBody(%d)): status", status, status)
		assert.Equal(t, f.ErrorBodies.Kinds[status], c.Kind, "ClassifyResponse(%d, ErrorBody(%d) = %s): kind", status, status, body)
		assert.Contains(t, c.Message, gatewayMessage, "ClassifyResponse(%d, ErrorBody(%d)): message", status, status)
	}
}

// testSDKErrorBodies serves the gateway's error bodies to the provider's
// SDK, which must read them as the provider's own errors.
func testSDKErrorBodies(t suiteT, p provider.Provider, f *Features) {
	required(t, "ErrorBodies.Kinds", len(f.ErrorBodies.Kinds))
	for _, status := range sortedStatuses(f.ErrorBodies.Kinds) {
		t.Run(fmt.Sprint(status), func(t suiteT) {
			reply := Reply{Status: status, Header: map[string]string{"Content-Type": "application/json"}, Body: string(errorBody(t, p, status, gatewayMessage))}
			err := sdkCall(t, f, context.Background(), reply)
			got, ok := p.Classifier().Classify(err, Now)
			require.True(t, ok, "Classifier does not recognise its SDK's error %T %v", err, err)
			assert.Equal(t, status, got.Status, "status")
			assert.Equal(t, f.ErrorBodies.Kinds[status], got.Kind, "kind")
			assert.Contains(t, got.Message, gatewayMessage, "the SDK read the message")
		})
	}
}

// testErrorBodyInvariants checks ErrorBody for every error status: a JSON
// body, which ClassifyResponse reads back with its status, a valid kind,
// and the contract's retry rule where it is firm (a 429 and a 500, 502,
// 503 or 504 are retried, a 400 is not).
func testErrorBodyInvariants(t suiteT, p provider.Provider, f *Features) {
	for status := 400; status <= 599; status++ {
		body := errorBody(t, p, status, "m")
		if !json.Valid(body) {
			t.Errorf("ErrorBody(%d) = %s is not JSON", status, describe(body))
			continue
		}
		if f.ErrorBodies.Parse != nil {
			msg, err := f.ErrorBodies.Parse(body)
			if err != nil || msg != "m" {
				t.Errorf("ErrorBody(%d) = %s: Parse gives %q, %v", status, body, msg, err)
			}
		}
		c := classifyResponse(t, p, status, nil, body)
		if c.Status != status || !c.Kind.Valid() {
			t.Errorf("ClassifyResponse(%d, ErrorBody(%d) = %s) = status %d, kind %q", status, status, body, c.Status, c.Kind)
		}
		switch status {
		case 429, 500, 502, 503, 504:
			assert.True(t, c.Retryable, "ClassifyResponse(%d, ErrorBody(%d) = %s): retryable", status, status, body)
		case 400:
			assert.False(t, c.Retryable, "ClassifyResponse(400, ErrorBody(400) = %s): not retryable", body)
		}
	}
}

func sortedStatuses(m map[int]events.ErrorKind) []int {
	out := make([]int, 0, len(m))
	for s := range m {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}
