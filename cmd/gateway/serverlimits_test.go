package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/cli"
	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/testkit"
)

// metricsAddrIn is the address the gateway's log says it serves its
// metrics on (--metrics-addr 127.0.0.1:0 picks one).
func metricsAddrIn(t *testing.T, logs string) string {
	t.Helper()
	m := regexp.MustCompile(`"msg":"gateway: serving metrics","addr":"([^"]+)"`).FindStringSubmatch(logs)
	require.NotNil(t, m, "the gateway logs its metrics address: %s", logs)
	return m[1]
}

// metric reads one sample of the gateway's /metrics (-1 when absent).
func metric(t *testing.T, metricsAddr, sample string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	require.NoError(t, err)
	return v
}

// One client holding every connection the gateway allows, with bodies
// that trickle in a byte at a time, connections that never send their
// headers and idle keep-alive connections, does not stop a normal call:
// the connections are capped (the cap is held, not passed, and logged at
// WARN and counted), the normal call coming at the cap takes the slot of
// the longest idle connection, and the trickling bodies are cut by the
// body timeout (408). The old gateway had no cap and no body timeout: the
// slow connections were held for as long as the client liked, until the
// descriptors ran out, and a normal call then timed out.
func TestSlowAndIdleConnectionsDoNotStopANormalCall(t *testing.T) {
	srv, _, _ := natstest.StartJS(t)
	fp := startFakeProvider(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const maxConns = 8
	addr, done, errb := startCommand(t, ctx, "run", "--nats-url", srv.URL(), "--listen", "127.0.0.1:0", "--create-stream",
		"--anthropic-url", fp.URL(), "--forward-ledger-headers", "--log-format", "json", "--metrics-addr", "127.0.0.1:0",
		"--max-connections", strconv.Itoa(maxConns), "--header-timeout", "1m", "--idle-timeout", "1m",
		// The slow bodies' timeout outlasts the normal call's arrival, so
		// that only the eviction of the longest idle connection can make
		// room for it (with 400 ms, a busy machine let a cut slow body free
		// the slot first, and nothing was evicted).
		"--body-timeout", "3s", "--min-body-rate", "1000000")
	host := strings.TrimPrefix(addr, "http://")
	metricsAddr := metricsAddrIn(t, errb.String())
	const call = `{"model":"claude-x","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`

	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", host)
		require.NoError(t, err)
		conns = append(conns, c)
		require.NoError(t, c.SetDeadline(time.Now().Add(30*time.Second)))
		return c, bufio.NewReader(c)
	}
	// Idle keep-alive connections: one call each, then silence.
	var idle []*bufio.Reader
	for range 2 {
		c, br := dial()
		_, err := fmt.Fprintf(c, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nX-Api-Key: k\r\nContent-Length: %d\r\n\r\n%s", len(call), call)
		require.NoError(t, err)
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		idle = append(idle, br)
	}
	// Bodies that trickle: the headers, then a byte.
	var slow []*bufio.Reader
	for range 3 {
		c, br := dial()
		_, err := fmt.Fprintf(c, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nX-Api-Key: k\r\nContent-Length: 30000000\r\n\r\n{")
		require.NoError(t, err)
		slow = append(slow, br)
	}
	// Connections that never send their headers fill the cap.
	var silent []*bufio.Reader
	for range maxConns - len(idle) - len(slow) {
		_, br := dial()
		silent = append(silent, br)
	}
	require.Eventually(t, func() bool { return metric(t, metricsAddr, "ledger_gateway_connections_open") == maxConns },
		10*time.Second, 5*time.Millisecond, "the attacker holds every connection allowed")

	// A normal call, from another client, comes at the cap: it takes the
	// slot of the longest idle connection (the timeouts of idle and silent
	// connections are a minute: only that makes room so soon).
	client := &http.Client{Timeout: 20 * time.Second}
	req, err := http.NewRequest(http.MethodPost, addr+"/v1/messages", strings.NewReader(call))
	require.NoError(t, err)
	req.Header.Set("X-Api-Key", "normal")
	resp, err := client.Do(req)
	require.NoError(t, err, "the normal call is served")
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	for i, br := range slow {
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err, "slow body %d is answered", i)
		assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode, "slow body %d", i)
	}
	_, err = idle[0].ReadByte()
	assert.ErrorIs(t, err, io.EOF, "the longest idle connection closed by the gateway, not by the test's deadline")
	assert.Equal(t, 1.0, metric(t, metricsAddr, "ledger_gateway_connections_evicted_total"))
	assert.LessOrEqual(t, metric(t, metricsAddr, "ledger_gateway_connections_open"), float64(maxConns))
	assert.GreaterOrEqual(t, metric(t, metricsAddr, `ledger_gateway_refusals_total{reason="connection_cap"}`), 1.0)
	assert.Equal(t, 3.0, metric(t, metricsAddr, `ledger_gateway_refusals_total{reason="body_timeout"}`))
	assert.Equal(t, 6.0, metric(t, metricsAddr, `ledger_gateway_requests_total{route="accounted"}`), "the idle connections' calls, the slow bodies, the normal call")
	logs := errb.String()
	assert.Contains(t, logs, `"level":"WARN","msg":"at the connection cap`)
	assert.Contains(t, logs, `"level":"WARN","msg":"gateway: request refused: the request body did not arrive in time`)

	for path, want := range map[string]string{"/healthz": "ok", "/readyz": "ready"} {
		resp, err := http.Get("http://" + metricsAddr + path)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, path)
		assert.Contains(t, string(body), want, path)
	}
	assert.GreaterOrEqual(t, metric(t, metricsAddr, "ledger_gateway_events_acked_total"), 0.0)
	assert.GreaterOrEqual(t, metric(t, metricsAddr, "ledger_gateway_events_queued"), 0.0)
	assert.Equal(t, 0.0, metric(t, metricsAddr, "ledger_gateway_events_undelivered"))
	for _, c := range conns {
		c.Close() // a silent connection would hold the shutdown 5 s
	}
	stopCommand(t, cancel, done, errb)
}

func TestLimitFlagsRefused(t *testing.T) {
	for _, args := range [][]string{
		{"--max-connections", "0"}, {"--max-calls-per-client", "0"}, {"--max-body-bytes-in-flight", "0"},
		{"--header-timeout", "0s"}, {"--body-timeout", "0s"}, {"--min-body-rate", "0"}, {"--write-timeout", "0s"}, {"--idle-timeout", "0s"},
	} {
		var out, errb strings.Builder
		assert.Equal(t, cli.ExitUsage, command(context.Background(), args, &out, &errb), "%v", args)
		assert.Contains(t, errb.String(), args[0], "%v", args)
	}
}

// A connection cap the file descriptors cannot hold is lowered, with a
// warning: the old gateway ran out of descriptors and could reach neither
// NATS nor the upstreams.
func TestConnectionCapFitsTheDescriptors(t *testing.T) {
	var rl syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl))
	if rl.Cur >= math.MaxInt32 {
		t.Skipf("the descriptor limit (%d) holds any cap", rl.Cur)
	}
	logger, logs := testkit.NewLogger(slog.LevelInfo)
	l := limitFlags{maxConns: math.MaxInt32}
	assert.Equal(t, max(1, int(rl.Cur)-fdReserve), l.connectionCap(logger))
	assert.Contains(t, logs.String(), `"level":"WARN","msg":"gateway: --max-connections lowered`)
	l.maxConns = 1
	assert.Equal(t, 1, l.connectionCap(logger), "a cap that fits is kept")
}
