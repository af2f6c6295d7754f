package fleet

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/retry"
)

// The settings of the test across OS processes: a short cooldown, a
// claim (the attempt timeout) far longer, and quick heartbeats.
const (
	killCooldown  = 2 * time.Second
	killAttempt   = time.Minute
	killHeartbeat = 100 * time.Millisecond
	killURLEnv    = "FLEET_KILL_HELPER_URL"
)

func killConfig() procConfig {
	pc := refusing(breakerConfig(1, killCooldown))
	pc.guards.AttemptTimeout = killAttempt
	pc.heartbeat = killHeartbeat
	return pc
}

// TestProbeHolderHelper is the process that holds the probe in
// TestSIGKILLedProbeHolder: it opens the fleet's breaker, waits out the
// cooldown, claims the probe with a call that never ends, says "probing"
// on stdout and waits to be killed. It does nothing in a normal run.
func TestProbeHolderHelper(t *testing.T) {
	url := os.Getenv(killURLEnv)
	if url == "" {
		t.Skip("the helper of TestSIGKILLedProbeHolder")
	}
	p := startProc(t, url, retry.SystemClock, "holder", killConfig())
	require.Error(t, p.call(fail503))
	eventually(t, "the breaker is open", p.isOpen)
	eventually(t, "the cooldown is over", func() bool { return !p.isOpen() })
	err := p.call(func() error {
		fmt.Println("probing")
		select {} // until SIGKILL
	})
	t.Fatalf("the probe ended: %v", err)
}

// A process SIGKILLed while it holds the fleet's probe (a claim far
// longer than the cooldown, as a slow probe needs) writes nothing more;
// the others see its heartbeat stop and probe themselves within one
// cooldown of its death, not when its claim would have run out.
func TestSIGKILLedProbeHolder(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	srv := natstest.Start(t)
	b := startProc(t, srv.URL(), retry.SystemClock, "proc-b", killConfig())

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", "^TestProbeHolderHelper$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), killURLEnv+"="+srv.URL())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(out)
	for lines.Scan() && !strings.Contains(lines.Text(), "probing") {
		t.Log("helper: ", lines.Text())
	}
	require.NoError(t, lines.Err())

	eventually(t, "b sees the helper's probe", func() bool {
		rec, ok := b.breakerOf()
		return ok && rec.State == stateHalfOpen && rec.Probe == "holder"
	})
	rec, _ := b.breakerOf()
	assert.GreaterOrEqual(t, rec.ProbeUntil.Sub(rec.At), killAttempt, "the claim lasts the attempt timeout")
	require.ErrorIs(t, b.call(succeed), retry.ErrCircuitOpen, "the helper's probe is in flight")

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	killed := time.Now()
	var calls int
	for {
		calls++
		err := b.call(succeed)
		if err == nil {
			break
		}
		require.ErrorIs(t, err, retry.ErrCircuitOpen)
		require.Less(t, time.Since(killed), killCooldown, "b recovers within one cooldown of the kill")
		time.Sleep(10 * time.Millisecond) // paces the calls: b's state changes on its own (heartbeats)
	}
	t.Logf("b probed and closed the breaker %v after the kill, at its call %d", time.Since(killed), calls)
	rec, _ = b.breakerOf()
	assert.Equal(t, stateClosed, rec.State)
}
