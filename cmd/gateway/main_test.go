package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
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
	"github.com/agentledger/ledger/internal/testkit"
)

func TestFlagsRefused(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--openai-url", "https://api.openai.com/v1?x=1"}, "--openai-url"},
		{[]string{"--gemini-url", "ftp://x"}, "--gemini-url"},
		{[]string{"--max-retries", "-1"}, "--max-retries"},
		{[]string{"--attempt-timeout", "0s"}, "--attempt-timeout"},
		{[]string{"--breaker-threshold", "0"}, "--breaker-threshold"},
		{[]string{"--limit", "gemini/gemini-2.5-flash=qpm:3"}, "--limit"},
		{[]string{"--retry-budget-window", "1ms"}, "--retry-budget-window"},
		{[]string{"--log-level", "loud"}, "--log-level"},
		{[]string{"--replicas", "9"}, "--replicas"},
		{[]string{"--outbox-max-events", "0"}, "--outbox-max-events"},
		{[]string{"--outbox-max-bytes", "0"}, "--outbox-max-bytes"},
		{[]string{"--inbox-prefix", "_INBOX.>"}, "inbox-prefix"},
		{[]string{"extra"}, "unknown command"},
		{[]string{"run", "extra"}, "no arguments"},
		{[]string{"--no-such-flag"}, "no-such-flag"},
		{[]string{"--listen", "0.0.0.0:8088"}, "not a loopback address"},
		{[]string{"--listen", ":8088"}, "not a loopback address"},
		{[]string{"--listen", "[::]:8088"}, "not a loopback address"},
		{[]string{"--listen", "gateway.example.com:8088"}, "not a loopback address"},
		{[]string{"--keys", "k.json", "--insecure-no-auth"}, "not with --keys"},
		{[]string{"--keys", "/no/such/keys.json"}, "--keys"},
		{[]string{"--labels", "Team=x"}, `-labels: labels["Team"]: key must be a lower-case letter`},
		{[]string{"--labels", "team=a", "--labels", "team=b"}, `-labels: labels["team"]: key is given twice`},
		{[]string{"--labels", "team=%zz"}, "bad percent escape"},
	}
	for _, tt := range tests {
		assertRefused(t, tt.args, tt.want)
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
func startCommand(t *testing.T, ctx context.Context, args ...string) (string, <-chan int, *testkit.Logs) {
	t.Helper()
	out, errb := &testkit.Logs{}, &testkit.Logs{}
	listening := out.Watch("listening on ")
	done := make(chan int, 1)
	go func() { done <- command(ctx, args, out, errb) }()
	select {
	case line := <-listening:
		_, addr, _ := strings.Cut(line, "listening on ")
		return addr, done, errb
	case code := <-done:
		t.Fatalf("the gateway ended with %d: %s", code, errb.String())
	case <-time.After(testkit.WaitTimeout):
		t.Fatal("the gateway did not start")
	}
	return "", nil, nil
}

// stopCommand stops the command started by startCommand (cancel is its
// context's) and requires that it exits 0.
func stopCommand(t *testing.T, cancel context.CancelFunc, done <-chan int, errb *testkit.Logs) {
	t.Helper()
	cancel()
	select {
	case code := <-done:
		require.Equal(t, cli.ExitOK, code, errb.String())
	case <-time.After(60 * time.Second):
		t.Fatal("the gateway did not stop")
	}
}

// leakKey is a credential recognisable wherever it leaks.
const leakKey = "sk-LEAKCHECK-cmd-4b06e1d2a9"

// The command as it ships: it serves, publishes every attempt, stops
// cleanly on its context (SIGINT/SIGTERM), and never writes a client's
// credential into its logs (at debug level) or the events.
// The help text says how a test gets a free port and learns it: --listen
// 127.0.0.1:0, the stdout line and the log line that name the address
// (issue 18: neither was documented).
func TestHelpDocumentsAFreePort(t *testing.T) {
	var usage, flags bytes.Buffer
	assert.Equal(t, cli.ExitOK, command(context.Background(), []string{"help"}, &usage, io.Discard))
	assert.Equal(t, cli.ExitOK, command(context.Background(), []string{"run", "-h"}, io.Discard, &flags))
	for name, text := range map[string]string{"gateway help": usage.String(), "gateway run -h": flags.String()} {
		for _, want := range []string{"--listen 127.0.0.1:0", `"gateway listening on http://ADDR"`, `"gateway: listening"`, "addr=ADDR", "ledgertest.StartGateway"} {
			assert.Contains(t, text, want, name)
		}
	}
}

func TestRunPublishesAndKeepsCredentialsOut(t *testing.T) {
	srv, _, js := natstest.StartJS(t)
	fp, err := fakeprovider.Listen("127.0.0.1:0", fakeprovider.Options{Seed: 3, Mix: fakeprovider.Mix{RateLimit: 0.3}})
	require.NoError(t, err)
	t.Cleanup(fp.Close)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, done, errb := startCommand(t, ctx, "run", "--nats-url", srv.URL(), "--listen", "127.0.0.1:0", "--create-stream",
		"--anthropic-url", fp.URL(), "--openai-url", fp.URL(), "--gemini-url", "http://127.0.0.1:1",
		"--forward-ledger-headers", "--retry-base-delay", "1ms", "--log-level", "debug", "--log-format", "json", "--labels", "env=cmd,team=gw")

	post := func(path, body string, kv ...string) *http.Response {
		return postTo(t, addr, path, body, append([]string{"X-Ledger-Session-Id", "sess-cmd"}, kv...)...)
	}
	for i := range 6 {
		// Named requests: the fake provider's faults are a function of
		// the IDs, so these calls' 429s are the same on every run (and
		// within the retries).
		resp := post("/v1/messages", `{"model":"claude-x","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`, "X-Api-Key", leakKey,
			"X-Ledger-Request-Id", fmt.Sprintf("cmd-call-%d", i), "X-Ledger-Labels", fmt.Sprintf("team=t%d", i))
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
	assert.Contains(t, logs, `"msg":"gateway: listening","addr":"`+strings.TrimPrefix(addr, "http://")+`"`,
		"the log line the help text names carries the address printed on stdout")

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
		want := map[string]string{"env": "cmd", "team": "gw"} // --labels
		if n, ok := strings.CutPrefix(ev.RequestID, "cmd-call-"); ok {
			want["team"] = "t" + n // X-Ledger-Labels over --labels
		}
		assert.Equal(t, want, map[string]string(ev.Labels), "event %d", seq)
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
	call := func(addr string) *http.Response { return callMessages(t, addr, "X-Api-Key", "k") }
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

// Without --keys the gateway serves loopback only: a non-loopback
// address is refused before anything starts, unless --insecure-no-auth.
func TestNonLoopbackWithoutKeysRefused(t *testing.T) {
	// The refusals are in TestFlagsRefused.
	for _, ok := range []string{"127.0.0.1:0", "localhost:0", "[::1]:0", "127.0.0.2:0"} {
		assert.True(t, loopback(ok), ok)
	}
}

// With --insecure-no-auth a non-loopback address is served, with a
// warning.
func TestInsecureNoAuthWarns(t *testing.T) {
	srv, _, _ := natstest.StartJS(t)
	ctx, cancel := context.WithCancel(context.Background())
	_, done, errb := startCommand(t, ctx, "run", "--nats-url", srv.URL(), "--listen", "0.0.0.0:0", "--insecure-no-auth", "--create-stream")
	cancel()
	require.Equal(t, cli.ExitOK, <-done, errb.String())
	assert.Contains(t, errb.String(), "level=WARN msg=\"gateway: serving without client keys (--insecure-no-auth)")
}

// "gateway key new -h" prints the usage; it makes no key for a client
// named "-h".
func TestKeyNewHelp(t *testing.T) {
	for _, args := range [][]string{{"key", "-h"}, {"key", "new", "-h"}, {"key", "new", "--help"}} {
		var out bytes.Buffer
		require.Equal(t, cli.ExitOK, command(context.Background(), args, &out, io.Discard), args)
		assert.Contains(t, out.String(), "usage: gateway key new NAME", args)
		assert.NotContains(t, out.String(), "lk-", args)
	}
}

// gateway key new makes a key and its entry; with the file the gateway
// serves any address, refuses a call without a known key with 401 before
// it reaches the provider or the ledger, and sends the key's credential
// upstream in the client key's place.
func TestKeysFromTheCommand(t *testing.T) {
	var out bytes.Buffer
	require.Equal(t, cli.ExitOK, command(context.Background(), []string{"key", "new", "team-a"}, &out, io.Discard))
	key, entry, ok := strings.Cut(strings.TrimSpace(out.String()), "\n")
	require.True(t, ok, out.String())
	require.True(t, strings.HasPrefix(key, "lk-"), key)
	entry = strings.TrimSuffix(entry, "}") + `,"credentials":{"anthropic":{"env":"TEST_GATEWAY_ANTHROPIC_KEY"}}}`
	t.Setenv("TEST_GATEWAY_ANTHROPIC_KEY", leakKey)
	file := t.TempDir() + "/keys.json"
	require.NoError(t, os.WriteFile(file, []byte(`{"keys":[`+entry+`]}`), 0o600))

	var mu sync.Mutex
	var seen []string
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("X-Api-Key"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"m","type":"message","usage":{"input_tokens":3,"output_tokens":1}}`)
	}))
	t.Cleanup(upstream.Close)
	srv, _, js := natstest.StartJS(t)
	ctx, cancel := context.WithCancel(context.Background())
	addr, done, errb := startCommand(t, ctx, "run", "--nats-url", srv.URL(), "--listen", "0.0.0.0:0", "--keys", file,
		"--create-stream", "--anthropic-url", upstream.URL, "--log-level", "debug")
	call := func(kv ...string) int { return callMessages(t, addr, kv...).StatusCode }
	assert.Equal(t, 401, call())
	assert.Equal(t, 401, call("X-Api-Key", "sk-ant-not-a-client-key"))
	assert.Equal(t, 401, call("X-Api-Key", "lk-forged"))
	assert.Equal(t, 200, call("X-Api-Key", key))
	cancel()
	require.Equal(t, cli.ExitOK, <-done, errb.String())
	mu.Lock()
	assert.Equal(t, []string{leakKey}, seen, "only the keyed call went upstream, with the key's credential")
	mu.Unlock()
	logs := errb.String()
	assert.Regexp(t, `level=WARN msg="gateway: request refused" .*reason=unauthenticated`, logs)
	assert.NotContains(t, logs, key)
	assert.NotContains(t, logs, "LEAKCHECK")
	s, err := js.Stream(context.Background(), names.AttemptsStream)
	require.NoError(t, err)
	info, err := s.Info(context.Background())
	require.NoError(t, err)
	assert.Equal(t, uint64(1), info.State.Msgs, "the refused calls are not in the ledger")
}

// Issue 17 item 3, as filed: two replicas share the fleet's guards; a
// tenant whose own key gets 429 retry-after 30 through one replica holds
// its own later calls on the other, and no one else's.
func TestOneTenantsHoldIsItsOwnAcrossReplicas(t *testing.T) {
	const keyA, keyB = "sk-ant-tenant-a-88d1c0", "sk-ant-tenant-b-51e7aa"
	var mu sync.Mutex
	calls := map[string]int{}
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := r.Header.Get("X-Api-Key")
		mu.Lock()
		calls[k]++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if k == keyA {
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(429)
			_, _ = io.WriteString(w, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`)
			return
		}
		_, _ = io.WriteString(w, `{"id":"m","type":"message","usage":{"input_tokens":3,"output_tokens":1}}`)
	}))
	t.Cleanup(upstream.Close)
	srv, _, _ := natstest.StartJS(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := func() string {
		addr, done, errb := startCommand(t, ctx, "run", "--nats-url", srv.URL(), "--listen", "127.0.0.1:0", "--create-stream",
			"--anthropic-url", upstream.URL, "--max-retries", "0", "--hint-cap", "1s")
		t.Cleanup(func() {
			cancel()
			if code := <-done; code != cli.ExitOK {
				t.Errorf("a replica ended with %d: %s", code, errb.String())
			}
		})
		return addr
	}
	a, b := start(), start()
	call := func(addr, key string) *http.Response { return callMessages(t, addr, "X-Api-Key", key) }
	require.Equal(t, 429, call(a, keyA).StatusCode, "A's own 429")
	require.Eventually(t, func() bool {
		return call(b, keyA).Header.Get("X-Ledger-Gateway-Error") == "rate_limited"
	}, 10*time.Second, 10*time.Millisecond, "replica b holds A's calls once a's hold reached the fleet")
	for range 3 {
		assert.Equal(t, 200, call(b, keyB).StatusCode, "B is not held")
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 3, calls[keyB])
}

// callMessages posts an Anthropic call to the gateway at addr with the
// headers given as name, value pairs, and returns its answer, read.
func callMessages(t *testing.T, addr string, kv ...string) *http.Response {
	t.Helper()
	return postTo(t, addr, "/v1/messages", `{"model":"claude-x","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, kv...)
}

// postTo posts body to path of the gateway at addr with the headers given
// as name, value pairs, and returns its answer, read.
func postTo(t *testing.T, addr, path, body string, kv ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, addr+path, strings.NewReader(body))
	require.NoError(t, err)
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Set(kv[i], kv[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}
