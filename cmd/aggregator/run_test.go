package main

import (
	"context"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/cli"
	"github.com/agentledger/ledger/internal/ledgertest"
	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/testkit"
	"github.com/agentledger/ledger/internal/topology"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// get fetches a URL and returns its status and body ("" on error).
func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metric reads one sample of a Prometheus text exposition.
func metric(body, name string) (float64, bool) {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	return v, err == nil
}

// aggregator run --metrics-addr serves the metrics of what it applies and
// rejects, /healthz and /readyz; the log is JSON with --log-format json;
// and asking for another duplicate window than the existing stream's is
// a warning that says how to change it.
func TestRunServesMetrics(t *testing.T) {
	srv, _, js := natstest.StartJS(t)
	_, err := topology.EnsureAttempts(t.Context(), js, topology.Config{})
	require.NoError(t, err)
	w := ledgertest.Generate(rand.New(rand.NewPCG(1, 2)), ledgertest.Spec{Sessions: 3, Calls: 20, Prefix: "m-"})
	ledgertest.Publish(t, js, w.Messages)
	_, err = js.Publish(t.Context(), "ledger.attempts.sess-x.req-x", []byte("{not json"))
	require.NoError(t, err)

	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(t.Context())
	var stderr testkit.Logs // the command's stderr, read while it runs
	done := make(chan int, 1)
	go func() {
		done <- command(ctx, []string{"run", "--nats-url", srv.URL(), "--metrics-addr", addr, "--log-format", "json",
			"--duplicate-window", "10m", "--metric-labels", "team"}, io.Discard, &stderr)
	}()
	base := "http://" + addr
	want := float64(len(w.Messages) + 1)
	var body string
	require.Eventually(t, func() bool {
		var code int
		code, body = get(base + "/metrics")
		v, ok := metric(body, "ledger_aggregator_checkpoint_sequence")
		lag, lok := metric(body, "ledger_aggregator_lag_events")
		held, _ := metric(body, "ledger_aggregator_lease_held")
		return code == http.StatusOK && ok && v == want && lok && lag == 0 && held == 1
	}, 30*time.Second, 20*time.Millisecond, "metrics: %s\nstderr: %s", body, stderr.String())
	applied, _ := metric(body, "ledger_aggregator_events_applied_total")
	assert.Equal(t, want-1, applied, "the rejected event is not applied")
	rejected, _ := metric(body, `ledger_aggregator_rejected_total{reason="malformed_json"}`)
	assert.Equal(t, 1.0, rejected)
	held, _ := metric(body, "ledger_aggregator_lease_held")
	assert.Equal(t, 1.0, held)
	assert.Contains(t, body, "ledger_aggregator_batch_seconds_bucket")
	batches, _ := metric(body, "ledger_aggregator_batch_seconds_count")
	assert.GreaterOrEqual(t, batches, 1.0, "every committed batch is observed")
	var succeeded float64
	for _, r := range w.Requests {
		if r.Status == "succeeded" {
			succeeded++
		}
	}
	got, _ := metric(body, `ledger_requests_total{model="claude-test",outcome="succeeded",provider="anthropic",team=""}`)
	assert.Equal(t, succeeded, got, "the usage series, with the metric label: %s", body)
	overflow, _ := metric(body, `ledger_metric_label_overflow_total{key="team"}`)
	assert.Zero(t, overflow)

	code, text := get(base + "/healthz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok\n", text)
	code, text = get(base + "/readyz")
	assert.Equal(t, http.StatusOK, code, text)
	assert.Contains(t, text, "holding the lease")

	cancel()
	require.Equal(t, cli.ExitOK, <-done, stderr.String())
	logs := stderr.String()
	assert.Contains(t, logs, `"level":"WARN","msg":"LEDGER_ATTEMPTS has duplicate window 2m0s, not the 10m0s asked for`)
	assert.Contains(t, logs, "nats stream edit LEDGER_ATTEMPTS --dupe-window 10m0s")
	for _, line := range stderr.Lines() {
		assert.True(t, strings.HasPrefix(line, "{"), "every log line is JSON: %s", line)
	}
}

// Bad --metric-labels and --metric-label-values are refused before
// anything starts, naming the flag, the value and the rule.
func TestRunMetricLabelsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"not a key", []string{"--metric-labels", "Team"}, `--metric-labels: "Team": not a label key`},
		{"a series' own label", []string{"--metric-labels", "team,model"}, `--metric-labels: "model": reserved`},
		{"per session", []string{"--metric-labels", "session_id"}, `--metric-labels: "session_id": reserved`},
		{"twice", []string{"--metric-labels", "team, team"}, `--metric-labels: "team": named twice`},
		{"too many", []string{"--metric-labels", "a,b,c,d,e"}, "at most 4 keys"},
		{"cap", []string{"--metric-labels", "team", "--metric-label-values", "-1"}, `--metric-label-values: "-1": must be 1 to 10000`},
		{"without metrics", []string{"--metric-labels", "team"}, "--metric-labels: the usage metrics are served only with --metrics-addr"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"run", "--nats-url", "nats://127.0.0.1:1"}, tc.args...)
			if tc.name != "without metrics" {
				args = append(args, "--metrics-addr", "127.0.0.1:0")
			}
			code, _, stderr := run(t, args...)
			assert.Equal(t, cli.ExitUsage, code)
			assert.Contains(t, stderr, tc.want)
		})
	}
}

func TestRunMetricsAddrTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	code, _, stderr := run(t, "run", "--nats-url", "nats://127.0.0.1:1", "--metrics-addr", ln.Addr().String())
	assert.Equal(t, cli.ExitUsage, code)
	assert.Contains(t, stderr, "--metrics-addr")
}

// Every subcommand takes the same connection and logging flags, and -h
// lists the subcommands.
func TestSameFlagsEverywhere(t *testing.T) {
	code, out, _ := run(t, "-h")
	assert.Equal(t, cli.ExitOK, code)
	for _, sub := range []string{"run", "report", "wait", "rebuild", "verify"} {
		assert.Contains(t, out, "  "+sub)
		code, _, stderr := run(t, sub, "-h")
		assert.Equal(t, cli.ExitOK, code, sub)
		for _, f := range []string{"-nats-url", "-creds", "-nkey", "-tls-ca", "-tls-cert", "-tls-key", "-context", "-log-format"} {
			assert.Contains(t, stderr, f, "%s -h lists %s", sub, f)
		}
	}
	code, _, stderr := run(t, "wait", "--log-format", "xml", "--nats-url", "nats://127.0.0.1:1")
	assert.Equal(t, cli.ExitUsage, code)
	assert.Contains(t, stderr, "--log-format")
}
