package main

import (
	"context"
	"net/http"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/emit"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/proctest"
	"github.com/agentledger/ledger/internal/sim/fakeprovider"
	"github.com/agentledger/ledger/internal/topology"
)

// TestMain lets a test start this binary as the gateway itself
// (package proctest).
func TestMain(m *testing.M) {
	proctest.Main(main)
	os.Exit(m.Run())
}

var listening = regexp.MustCompile(`gateway listening on (http://\S+)`)

// startGatewayProcess runs the gateway as a real OS process and returns
// it with the address it serves on.
func startGatewayProcess(t *testing.T, args ...string) (*proctest.Process, string) {
	t.Helper()
	p := proctest.Start(t, nil, append([]string{"run", "--listen", "127.0.0.1:0"}, args...)...)
	var addr string
	require.Eventually(t, func() bool {
		m := listening.FindStringSubmatch(p.Stdout.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil || p.Cmd.ProcessState != nil
	}, 30*time.Second, 10*time.Millisecond)
	require.NotEmpty(t, addr, "the gateway did not start: %s", p.Stderr)
	return p, addr
}

func streamIDs(ctx context.Context, js jetstream.JetStream) map[string]int {
	ids := map[string]int{}
	s, err := js.Stream(ctx, names.AttemptsStream)
	if err != nil {
		return ids
	}
	info, err := s.Info(ctx)
	if err != nil {
		return ids
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			return ids
		}
		ids[m.Header.Get(jetstream.MsgIDHeader)]++
	}
	return ids
}

// A gateway with --outbox killed with SIGKILL during a NATS outage loses
// none of the events of the calls it answered: the next start delivers
// them, each once.
func TestGatewaySIGKILLDuringAnOutageLosesNoEvent(t *testing.T) {
	const before, during = 3, 10
	srv := natstest.Start(t)
	_, js := srv.Connect(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	_, err := topology.EnsureAttempts(ctx, js, topology.Config{})
	require.NoError(t, err)
	fp, err := fakeprovider.Listen("127.0.0.1:0", fakeprovider.Options{Seed: 9})
	require.NoError(t, err)
	t.Cleanup(fp.Close)
	outbox := t.TempDir()
	args := []string{"--nats-url", srv.URL(), "--anthropic-url", fp.URL(), "--outbox", outbox, "--fleet-limits", "off", "--forward-ledger-headers"}

	gw, addr := startGatewayProcess(t, args...)
	call := func(n int) {
		for i := range n {
			req, err := http.NewRequest(http.MethodPost, addr+"/v1/messages", strings.NewReader(`{"model":"claude-x","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`))
			require.NoError(t, err)
			req.Header.Set("X-Ledger-Session-Id", "sess-kill")
			req.Header.Set("X-Api-Key", "sk-test-kill")
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode, "call %d: %s", i, gw.Stderr)
		}
	}
	outboxEvents := func() int {
		info, err := emit.InspectOutbox(outbox)
		require.NoError(t, err)
		return info.Events
	}
	call(before)
	require.Eventually(t, func() bool { return len(streamIDs(ctx, js)) == before && outboxEvents() == 0 },
		30*time.Second, 10*time.Millisecond, "stderr: %s", gw.Stderr)

	srv.Shutdown() // the outage
	call(during)   // answered: their events wait
	require.Equal(t, during, outboxEvents(), "on disk before the answers")
	require.NoError(t, gw.Cmd.Process.Signal(syscall.SIGKILL))
	_ = gw.Cmd.Wait()

	_, js = srv.Restart(t).Connect(t)
	again, _ := startGatewayProcess(t, append(args, "--metrics-addr", "127.0.0.1:0", "--log-format", "json")...)
	require.Eventually(t, func() bool { return len(streamIDs(ctx, js)) == before+during },
		30*time.Second, 20*time.Millisecond, "stderr: %s", again.Stderr)
	// The outbox's depth and what it recovered are in the metrics.
	metricsAddr := metricsAddrIn(t, again.Stderr.String())
	assert.Equal(t, float64(during), metric(t, metricsAddr, "ledger_gateway_events_recovered_total"))
	require.Eventually(t, func() bool { return metric(t, metricsAddr, "ledger_gateway_outbox_events") == 0 },
		30*time.Second, 20*time.Millisecond, "the outbox empties once the stream acknowledges")
	require.NoError(t, again.Cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, again.Cmd.Wait(), again.Stderr.String())
	assert.Contains(t, again.Stderr.String(), "delivering the events an earlier run left in the outbox")
	for id, n := range streamIDs(ctx, js) {
		assert.Equal(t, 1, n, "event %s", id)
	}
	assert.Equal(t, uint64(before+during), uint64(fp.Truth().Total.Attempts), "one event per attempt")
	assert.Zero(t, outboxEvents())
}
