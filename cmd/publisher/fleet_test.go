package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/cli"
	"github.com/agentledger/ledger/internal/ledgertest"
	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/projection"
	"github.com/agentledger/ledger/internal/report"
	"github.com/agentledger/ledger/internal/sim/fakeprovider"
)

func TestSimulateFleetFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"processes zero", []string{"--processes", "0"}, "--processes: 0 must be from 1 to 64"},
		{"processes too many", []string{"--processes", "65"}, "--processes: 65 must be from 1 to 64"},
		{"fleet limits", []string{"--fleet-limits", "maybe"}, `--fleet-limits: "maybe" must be on, off or none`},
		{"outage without colon", []string{"--outage", "2s"}, `--outage: "2s" must be START:DURATION`},
		{"outage not durations", []string{"--outage", "a:b"}, `--outage: "a:b"`},
		{"outage of no duration", []string{"--outage", "1s:0s"}, "the duration must be positive"},
		{"negative tier", []string{"--tier-rpm", "-1"}, "must not be negative"},
		{"cooldown", []string{"--cooldown", "0s"}, "--cooldown: 0s must be positive"},
		{"threshold", []string{"--breaker-threshold", "0"}, "--breaker-threshold: 0 must be at least 1"},
		{"worker", []string{"--worker", "3/3", "--provider-url", "http://127.0.0.1:1"}, `--worker: "3/3" must be K/N`},
		{"provider off loopback", []string{"--worker", "0/2", "--provider-url", "http://example.com"}, "must be a loopback URL"},
		{"limit", []string{"--limit", "gemini/gemini-2.5-flash=rpm"}, `--limit: "gemini/gemini-2.5-flash=rpm": "rpm" must be KEY:N`},
		{"limits file", []string{"--limits-file", "/nonexistent/limits"}, "--limits-file: open /nonexistent/limits"},
		{"retry budget", []string{"--retry-budget-percent", "2000"}, "--retry-budget-percent: 2000 must be from 0 to 1000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, _ := runCmd(t, t.Context(), "", append([]string{"simulate"}, tt.args...)...)
			assert.Equal(t, cli.ExitUsage, code)
			_, err := parseSimulate(tt.args, io.Discard)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// A fleet of OS processes (this test binary run as the command) with the
// fleet's limits on, against a fake provider whose tier limit bites: the
// processes' figures add up, and the ledger the aggregator projects from
// their events equals the provider's ground truth to the token, every
// real attempt counted once and each fleet rejection as an attempt that
// never reached the provider.
func TestSimulateProcessesLedgerEqualsTruth(t *testing.T) {
	if testing.Short() {
		t.Skip("runs OS processes")
	}
	srv, _, js := natstest.StartJS(t)
	ledgertest.RunAggregator(t, js, projection.Config{BatchSize: 16})
	truthPath := filepath.Join(t.TempDir(), "truth.json")
	code, stdout, stderr := runCmd(t, t.Context(), "", "simulate", "--create-stream", "--nats-url", srv.URL(),
		"--processes", "3", "--agents", "2", "--sessions", "6", "--calls", "5", "--seed", "9", "--run-id", "proc",
		"--rate-limit", "0", "--overload", "0", "--server-error", "0", "--billed-timeout", "0", "--bad-request", "0",
		"--attempt-timeout", "5s", "--max-retries", "6",
		"--fleet-limits", "on", "--tier-rpm", "600", "--providers", "anthropic,openai", "--truth", truthPath, "--json")
	require.Equal(t, cli.ExitOK, code, stderr)
	var sum simulateSummary
	require.NoError(t, json.Unmarshal([]byte(stdout), &sum), stdout)
	assert.Equal(t, 3, sum.Processes)
	assert.Equal(t, "on", sum.FleetLimits)
	assert.Equal(t, &fakeprovider.Tier{RequestsPerMinute: 600}, sum.Tier)
	assert.Equal(t, int64(30), sum.Fleet.Calls)
	assert.Positive(t, sum.WallSeconds)
	assert.Empty(t, sum.Errors)
	assert.Equal(t, uint64(sum.Fleet.Attempts), sum.Events.Acked)
	require.NotNil(t, sum.Truth)
	assert.Equal(t, int64(30), sum.Truth.Requests)
	t.Logf("provider 429s %d, waits for capacity %d, attempts %d, wall %.2fs", sum.RateLimited, sum.Fleet.Waits, sum.Fleet.Attempts, sum.WallSeconds)
	assert.Positive(t, sum.RateLimited+sum.Fleet.Waits, "the tier limit bites (30 calls, room for 10 a second)")
	rejected := sum.Fleet.Outcomes["circuit_open"] + sum.Fleet.Outcomes["rate_limit"] - sum.RateLimited
	assert.Equal(t, sum.Truth.Attempts+rejected, sum.Fleet.Attempts,
		"every attempt the fleet made reached the provider, but its rejections")

	var truth fakeprovider.Truth
	b, err := os.ReadFile(truthPath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &truth))
	ledgertest.WaitCaughtUp(t, js)
	l, err := report.Load(t.Context(), js, "")
	require.NoError(t, err)
	require.Len(t, l.Sessions, 6, "the processes split the sessions")
	require.Len(t, truth.Sessions, 6)
	for _, s := range l.Sessions {
		want, ok := truth.Sessions[s.SessionID]
		require.True(t, ok, "session %s is not in the ground truth", s.SessionID)
		assert.Equal(t, want.Requests, s.Requests, "session %s requests", s.SessionID)
		assert.Equal(t, want.RequestsSucceeded, s.Succeeded, "session %s succeeded", s.SessionID)
		assert.GreaterOrEqual(t, s.Attempts, want.Attempts, "session %s attempts", s.SessionID)
		assert.Equal(t, want.Usage, s.Usage, "session %s usage", s.SessionID)
		assert.Equal(t, want.Billed, s.Billed, "session %s billed", s.SessionID)
	}
	assert.Equal(t, truth.Total.Usage, l.Total.Usage)
	assert.Equal(t, truth.Total.Billed, l.Total.Billed)
	assert.Equal(t, truth.Total.Attempts+rejected, l.Total.Attempts, "each attempt once, rejections included")
	assert.Equal(t, sum.Fleet.CallsSucceeded, l.Total.Succeeded)
	assert.Zero(t, l.Total.Pending)
}
