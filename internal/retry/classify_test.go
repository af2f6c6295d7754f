package retry

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
)

func TestStatusKind(t *testing.T) {
	tests := []struct {
		status    int
		kind      events.ErrorKind
		retryable bool
	}{
		{408, events.KindTimeout, true},
		{409, events.KindServer, true},
		{429, events.KindRateLimit, true},
		{500, events.KindServer, true},
		{502, events.KindServer, true},
		{503, events.KindOverloaded, true},
		{504, events.KindTimeout, true},
		{529, events.KindOverloaded, true},
		{400, events.KindClient, false},
		{401, events.KindAuth, false},
		{402, events.KindQuota, false},
		{403, events.KindAuth, false},
		{404, events.KindClient, false},
		{413, events.KindClient, false},
		{422, events.KindClient, false},
		{501, events.KindServer, false},
		{599, events.KindServer, false},
		{200, events.KindOther, false},
		{0, events.KindOther, false},
		{600, events.KindOther, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			kind, retryable := StatusKind(tt.status)
			assert.Equal(t, tt.kind, kind)
			assert.Equal(t, tt.retryable, retryable)
			assert.True(t, kind.Valid())
		})
	}
}

func TestClassifyHTTP(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		status    int
		header    map[string]string
		kind      events.ErrorKind
		retryable bool
		hint      time.Duration
		hasHint   bool
	}{
		{"429 with hint", 429, map[string]string{"retry-after": "3"}, events.KindRateLimit, true, 3 * time.Second, true},
		{"529 without header", 529, nil, events.KindOverloaded, true, 0, false},
		{"500 told not to retry", 500, map[string]string{"x-should-retry": "false"}, events.KindServer, false, 0, false},
		{"503 told not to retry, with hint", 503, map[string]string{"x-should-retry": "false", "retry-after-ms": "10"}, events.KindOverloaded, false, 10 * time.Millisecond, true},
		{"400 told to retry", 400, map[string]string{"x-should-retry": "true"}, events.KindClient, true, 0, false},
		{"409 told to retry (case, spaces)", 409, map[string]string{"x-should-retry": " TRUE "}, events.KindServer, true, 0, false},
		{"401 told to retry", 401, map[string]string{"x-should-retry": "true"}, events.KindAuth, true, 0, false},
		{"404 bad override ignored", 404, map[string]string{"x-should-retry": "maybe"}, events.KindClient, false, 0, false},
		{"502 bad override ignored", 502, map[string]string{"x-should-retry": "1"}, events.KindServer, true, 0, false},
		{"408 nil header", 408, nil, events.KindTimeout, true, 0, false},
		{"413", 413, map[string]string{}, events.KindClient, false, 0, false},
		{"422", 422, map[string]string{}, events.KindClient, false, 0, false},
		{"403", 403, map[string]string{}, events.KindAuth, false, 0, false},
		{"504", 504, map[string]string{}, events.KindTimeout, true, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h http.Header
			if tt.header != nil {
				h = http.Header{}
				for k, v := range tt.header {
					h.Set(k, v)
				}
			}
			c := ClassifyHTTP(tt.status, h, now)
			assert.Equal(t, tt.status, c.Status)
			assert.Equal(t, tt.kind, c.Kind)
			assert.Equal(t, tt.retryable, c.Retryable)
			assert.Equal(t, tt.hasHint, c.HasHint)
			assert.Equal(t, tt.hint, c.Hint)
		})
	}
}

// timeoutErr is a net.Error that timed out, like a dial or read deadline.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestClassifyTransport(t *testing.T) {
	live := context.Background()
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(1, 0))
	defer cancel2()
	causeCtx, cancel3 := context.WithCancelCause(context.Background())
	cancel3(errors.New("user pressed ctrl-c"))

	opErr := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	urlErr := func(err error) error { return &url.Error{Op: "Post", URL: "https://api.example/v1", Err: err} }
	tests := []struct {
		name      string
		ctx       context.Context
		err       error
		ok        bool
		kind      events.ErrorKind
		retryable bool
		message   string // substring
	}{
		{"caller canceled wins over a net error", canceled, opErr, true, events.KindCanceled, false, "context canceled"},
		{"caller canceled wins over an attempt timeout", canceled, context.DeadlineExceeded, true, events.KindCanceled, false, ""},
		{"caller's deadline is not retried", expired, urlErr(context.DeadlineExceeded), true, events.KindCanceled, false, "deadline exceeded"},
		{"caller's cause is the message", causeCtx, errors.New("x"), true, events.KindCanceled, false, "ctrl-c"},
		{"caller canceled, unknown error", canceled, errors.New("odd"), true, events.KindCanceled, false, ""},
		{"attempt timeout is retryable", live, context.DeadlineExceeded, true, events.KindTimeout, true, "deadline"},
		{"wrapped attempt timeout", live, urlErr(fmt.Errorf("read: %w", context.DeadlineExceeded)), true, events.KindTimeout, true, ""},
		{"canceled attempt, live caller", live, context.Canceled, true, events.KindCanceled, false, ""},
		{"net timeout", live, &net.OpError{Op: "read", Net: "tcp", Err: timeoutErr{}}, true, events.KindTimeout, true, "i/o timeout"},
		{"os deadline", live, urlErr(&net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}), true, events.KindTimeout, true, ""},
		{"connection refused", live, urlErr(opErr), true, events.KindConnection, true, "refused"},
		{"dns error", live, urlErr(&net.DNSError{Err: "server misbehaving", Name: "api.example", IsTemporary: true}), true, events.KindConnection, true, ""},
		{"connection reset", live, fmt.Errorf("read body: %w", syscall.ECONNRESET), true, events.KindConnection, true, ""},
		{"broken pipe", live, syscall.EPIPE, true, events.KindConnection, true, ""},
		{"EOF", live, urlErr(io.EOF), true, events.KindConnection, true, "EOF"},
		{"unexpected EOF", live, fmt.Errorf("decode: %w", io.ErrUnexpectedEOF), true, events.KindConnection, true, ""},
		{"closed conn", live, net.ErrClosed, true, events.KindConnection, true, ""},
		{"joined errors", live, errors.Join(errors.New("a"), opErr), true, events.KindConnection, true, ""},
		{"certificate error in url.Error is not a network failure", live, urlErr(x509.UnknownAuthorityError{}), false, "", false, ""},
		{"unsupported scheme in url.Error", live, urlErr(errors.New(`unsupported protocol scheme "htp"`)), false, "", false, ""},
		{"unknown", live, errors.New("boom"), false, "", false, ""},
		{"nil caller ctx", nil, opErr, true, events.KindConnection, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := ClassifyTransport(tt.ctx, tt.err)
			require.Equal(t, tt.ok, ok)
			if !ok {
				assert.Equal(t, Classification{}, c)
				return
			}
			assert.Equal(t, tt.kind, c.Kind)
			assert.Equal(t, tt.retryable, c.Retryable)
			assert.Zero(t, c.Status)
			assert.NotEmpty(t, c.Message)
			assert.Contains(t, c.Message, tt.message)
		})
	}
}

func TestChain(t *testing.T) {
	never := ClassifierFunc(func(error, time.Time) (Classification, bool) { return Classification{}, false })
	first := ClassifierFunc(func(error, time.Time) (Classification, bool) {
		return Classification{Kind: events.KindAuth}, true
	})
	second := ClassifierFunc(func(error, time.Time) (Classification, bool) {
		return Classification{Kind: events.KindQuota}, true
	})
	tests := []struct {
		name  string
		chain Chain
		ok    bool
		kind  events.ErrorKind
	}{
		{"empty", nil, false, ""},
		{"none knows", Chain{never, nil, never}, false, ""},
		{"first answer wins", Chain{never, nil, first, second}, true, events.KindAuth},
		{"later answer", Chain{never, second}, true, events.KindQuota},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := tt.chain.Classify(errors.New("x"), time.Time{})
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.kind, c.Kind)
		})
	}
}

func TestTruncate(t *testing.T) {
	long := strings.Repeat("a", 2000)
	multi := strings.Repeat("a", 1023) + "é" // 'é' straddles byte 1024
	invalid := "ok \xff\xfe bytes"
	invalidLong := strings.Repeat("\xff", 1000) // each becomes 3 bytes as U+FFFD
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"short", "hello", "hello"},
		{"empty", "", ""},
		{"exactly the limit", long[:1024], long[:1024]},
		{"long is cut", long, long[:1024]},
		{"a character is not split", multi, strings.Repeat("a", 1023)},
		{"invalid UTF-8 is replaced", invalid, "ok \uFFFD bytes"},
		{"a run of invalid bytes becomes one replacement", invalidLong, "\uFFFD"},
		{"replacement does not break the limit", strings.Repeat("a\xff", 600), strings.Repeat("a\uFFFD", 256)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Truncate(tt.in)
			assert.Equal(t, tt.want, got)
			assert.LessOrEqual(t, len(got), events.MaxMessageBytes)
			assert.True(t, utf8.ValidString(got))
		})
	}
}
