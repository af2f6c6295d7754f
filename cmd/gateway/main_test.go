package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/cli"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/sim/fakeprovider"
)

// syncBuffer collects output written concurrently, and hands over the
// address the command prints when it listens.
type syncBuffer struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	addr chan string // receives the address once (the field itself never changes)
	sent bool
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Write(p)
	if s.addr != nil && !s.sent {
		if _, rest, ok := strings.Cut(s.buf.String(), "listening on "); ok {
			if line, _, ok := strings.Cut(rest, "\n"); ok {
				s.addr <- line
				s.sent = true
			}
		}
	}
	return len(p), nil
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func TestFlagsRefused(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--openai-url", "https://api.openai.com/v1"}, "--openai-url"},
		{[]string{"--gemini-url", "ftp://x"}, "--gemini-url"},
		{[]string{"--max-retries", "-1"}, "--max-retries"},
		{[]string{"--attempt-timeout", "0s"}, "--attempt-timeout"},
		{[]string{"--breaker-threshold", "0"}, "--breaker-threshold"},
		{[]string{"--log-level", "loud"}, "--log-level"},
		{[]string{"--replicas", "9"}, "--replicas"},
		{[]string{"extra"}, "unknown command"},
		{[]string{"run", "extra"}, "no arguments"},
		{[]string{"--no-such-flag"}, "no-such-flag"},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		code := command(context.Background(), tt.args, &out, &errb)
		assert.Equal(t, cli.ExitUsage, code, "%v", tt.args)
		assert.Contains(t, errb.String(), tt.want, "%v", tt.args)
	}
	var out bytes.Buffer
	assert.Equal(t, cli.ExitOK, command(context.Background(), []string{"-h"}, &out, io.Discard))
	assert.Contains(t, out.String(), "usage: gateway")
}

func TestNoStreamIsAUsageError(t *testing.T) {
	srv, _, _ := natstest.StartJS(t)
	var out, errb bytes.Buffer
	code := command(context.Background(), []string{"run", "--nats-url", srv.URL(), "--listen", "127.0.0.1:0"}, &out, &errb)
	assert.Equal(t, cli.ExitUsage, code)
	assert.Contains(t, errb.String(), "LEDGER_ATTEMPTS does not exist")
}

// startCommand runs the command with args until ctx ends, and returns the
// address it serves on, the channel of its exit status and its stderr.
func startCommand(t *testing.T, ctx context.Context, args ...string) (string, <-chan int, *syncBuffer) {
	t.Helper()
	out := &syncBuffer{addr: make(chan string, 1)}
	errb := &syncBuffer{}
	done := make(chan int, 1)
	go func() { done <- command(ctx, args, out, errb) }()
	select {
	case addr := <-out.addr:
		return addr, done, errb
	case code := <-done:
		t.Fatalf("the gateway ended with %d: %s", code, errb.String())
	case <-time.After(30 * time.Second):
		t.Fatal("the gateway did not start")
	}
	return "", nil, nil
}

// leakKey is a credential recognisable wherever it leaks.
const leakKey = "sk-LEAKCHECK-cmd-4b06e1d2a9"

// The command as it ships: it serves, publishes every attempt, stops
// cleanly on its context (SIGINT/SIGTERM), and never writes a client's
// credential into its logs (at debug level) or the events.
func TestRunPublishesAndKeepsCredentialsOut(t *testing.T) {
	srv, _, js := natstest.StartJS(t)
	fp, err := fakeprovider.Listen("127.0.0.1:0", fakeprovider.Options{Seed: 3, Mix: fakeprovider.Mix{RateLimit: 0.3}})
	require.NoError(t, err)
	t.Cleanup(fp.Close)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, done, errb := startCommand(t, ctx, "run", "--nats-url", srv.URL(), "--listen", "127.0.0.1:0", "--create-stream",
		"--anthropic-url", fp.URL(), "--openai-url", fp.URL(), "--gemini-url", "http://127.0.0.1:1",
		"--forward-ledger-headers", "--retry-base-delay", "1ms", "--log-level", "debug", "--log-format", "json")

	post := func(path, body string, kv ...string) *http.Response {
		req, err := http.NewRequest(http.MethodPost, addr+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("X-Ledger-Session-Id", "sess-cmd")
		for i := 0; i+1 < len(kv); i += 2 {
			req.Header.Set(kv[i], kv[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for i := range 6 {
		// Named requests: the fake provider's faults are a function of
		// the IDs, so these calls' 429s are the same on every run (and
		// within the retries).
		resp := post("/v1/messages", `{"model":"claude-x","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`, "X-Api-Key", leakKey,
			"X-Ledger-Request-Id", fmt.Sprintf("cmd-call-%d", i))
		assert.Equal(t, 200, resp.StatusCode, "call %d", i)
		assert.NotEmpty(t, resp.Header.Get("X-Ledger-Request-Id"))
	}
	post("/v1/chat/completions", `{"model":"gpt-x","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer "+leakKey)
	resp := post("/v1beta/models/gemini-x:generateContent?key="+leakKey, `{"contents":[{"parts":[{"text":"hi"}]}]}`)
	assert.Equal(t, 502, resp.StatusCode, "the Gemini upstream is unreachable")
	post("/v1/models", ``, "Authorization", "Bearer "+leakKey) // proxied, not accounted
	stopCommand(t, cancel, done, errb)
	logs := errb.String()
	assert.Contains(t, logs, "gateway: call")
	assert.Contains(t, logs, "not accounted")
	assert.NotContains(t, logs, "LEAKCHECK")

	s, err := js.Stream(context.Background(), names.AttemptsStream)
	require.NoError(t, err)
	info, err := s.Info(context.Background())
	require.NoError(t, err)
	truth := fp.Truth()
	gemini := int64(3) // the unreachable upstream's attempts
	assert.Equal(t, uint64(truth.Total.Attempts+gemini), info.State.Msgs, "one event per attempt")
	var unreachable int
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(context.Background(), seq)
		require.NoError(t, err)
		assert.NotContains(t, string(m.Data), "LEAKCHECK", "event %d", seq)
		ev, err := events.Decode(m.Data)
		require.NoError(t, err)
		assert.Equal(t, "sess-cmd", ev.SessionID)
		if ev.Error != nil && ev.Error.Kind == events.KindConnection {
			unreachable++
		}
	}
	assert.Equal(t, 3, unreachable, "the Gemini attempts failed to connect")
	_, err = js.KeyValue(context.Background(), names.GatewayAttemptsBucket)
	assert.NoError(t, err, "the gateway created its bucket")
}

// Two gateway replicas on one NATS share each upstream's breaker (fleet
// limits are on by default): the failures one replica sees open the
// circuit for the other, which then refuses the call without sending it
// upstream, answering 503 with retry-after.
func TestReplicasShareTheBreaker(t *testing.T) {
	srv, _, _ := natstest.StartJS(t)
	var mu sync.Mutex
	calls := 0
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(529)
		_, _ = io.WriteString(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	}))
	t.Cleanup(upstream.Close)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := func(threshold string) string {
		addr, done, errb := startCommand(t, ctx, "run", "--nats-url", srv.URL(), "--listen", "127.0.0.1:0", "--create-stream",
			"--anthropic-url", upstream.URL, "--max-retries", "0", "--breaker-threshold", threshold, "--breaker-cooldown", "1m")
		t.Cleanup(func() {
			cancel()
			if code := <-done; code != cli.ExitOK {
				t.Errorf("a replica ended with %d: %s", code, errb.String())
			}
		})
		return addr
	}
	// b would need 100 failures of its own to open its circuit.
	a, b := start("2"), start("100")
	call := func(addr string) *http.Response {
		req, err := http.NewRequest(http.MethodPost, addr+"/v1/messages", strings.NewReader(`{"model":"claude-x","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`))
		require.NoError(t, err)
		req.Header.Set("X-Api-Key", "k")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for range 2 {
		assert.Equal(t, 529, call(a).StatusCode, "the provider's own answer")
	}
	var refused *http.Response
	require.Eventually(t, func() bool {
		refused = call(b)
		return refused.StatusCode == http.StatusServiceUnavailable
	}, 10*time.Second, 10*time.Millisecond, "replica b refuses once a's failures opened the shared breaker")
	wait, err := strconv.Atoi(refused.Header.Get("Retry-After"))
	require.NoError(t, err)
	assert.Greater(t, wait, 50, "retry-after is the shared breaker's cooldown (1m), not a default")
	mu.Lock()
	sent := calls
	mu.Unlock()
	for range 5 {
		assert.Equal(t, http.StatusServiceUnavailable, call(b).StatusCode)
		assert.Equal(t, http.StatusServiceUnavailable, call(a).StatusCode)
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, sent, calls, "no replica sends anything upstream while the shared circuit is open")
	assert.LessOrEqual(t, calls, 4, "b saw the open circuit within a call or two (the report is written asynchronously)")
}
