package fleet

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/retry"
	"github.com/agentledger/ledger/internal/testkit"
)

func breakerConfig(threshold int, cooldown time.Duration) procConfig {
	return procConfig{guards: guard.Config{Breaker: breaker.Config{FailureThreshold: threshold, Cooldown: cooldown}}}
}

// One process's failures open the breaker for every process: the others
// see it through their watchers, without a failure of their own, and
// reject with a circuit_open event that names the fleet's breaker.
func TestBreakerOpenedByOneProcessOpensForAll(t *testing.T) {
	srv := natstest.Start(t)
	clk := testkit.NewClockNow()
	pc := breakerConfig(3, time.Hour)
	a := startProc(t, srv.URL(), clk, "proc-a", pc)
	b := startProc(t, srv.URL(), clk, "proc-b", pc)
	c := startProc(t, srv.URL(), clk, "proc-c", pc)

	var provider counter
	for range 3 {
		require.Error(t, a.call(provider.wrap(fail503)))
	}
	opened := time.Now()
	eventually(t, "b and c see the breaker open", func() bool { return b.isOpen() && c.isOpen() })
	t.Logf("the open breaker reached the other processes %v after the third failure", time.Since(opened))

	err := b.call(provider.wrap(succeed))
	require.ErrorIs(t, err, retry.ErrCircuitOpen)
	assert.Equal(t, int64(3), provider.n.Load(), "b's call reached no provider")
	evs := b.sink.Events()
	require.Len(t, evs, 1)
	assert.Equal(t, events.KindCircuitOpen, evs[0].Error.Kind)
	assert.True(t, evs[0].Final)
	assert.Contains(t, evs[0].Error.Message, "fleet breaker of "+upstreamKey+": circuit open until ")
	assert.Contains(t, evs[0].Error.Message, "opened by proc-a: 3 consecutive retryable failures across the fleet")
	var oe *OpenError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, "proc-a", oe.By)
}

// Failures of different processes add up: three processes with one
// failure each open a breaker whose threshold is three.
func TestBreakerCountsFailuresAcrossProcesses(t *testing.T) {
	srv := natstest.Start(t)
	clk := testkit.NewClockNow()
	pc := breakerConfig(3, time.Hour)
	procs := []*proc{
		startProc(t, srv.URL(), clk, "proc-a", pc),
		startProc(t, srv.URL(), clk, "proc-b", pc),
		startProc(t, srv.URL(), clk, "proc-c", pc),
	}
	for i, p := range procs {
		require.Error(t, p.call(fail503))
		// Each report is written before the next process fails, so that
		// every failure counts in the same generation.
		eventually(t, "the failure is counted", func() bool {
			u := p.fleet.upstream(upstreamKey)
			u.mu.Lock()
			defer u.mu.Unlock()
			return u.br.ok && (u.br.rec.Failures == i+1 || u.br.rec.State == stateOpen)
		})
	}
	for _, p := range procs {
		eventually(t, p.name+" sees the breaker open", p.isOpen)
	}
}

// After the cooldown the whole fleet sends exactly one probe: every
// other attempt, in every process, is rejected while it is in flight; its
// success closes the breaker for everyone.
func TestExactlyOneProbeFleetWide(t *testing.T) {
	srv := natstest.Start(t)
	clk := testkit.NewClockNow()
	pc := refusing(breakerConfig(2, time.Minute))
	procs := []*proc{
		startProc(t, srv.URL(), clk, "proc-a", pc),
		startProc(t, srv.URL(), clk, "proc-b", pc),
		startProc(t, srv.URL(), clk, "proc-c", pc),
	}
	for range 2 {
		require.Error(t, procs[0].call(fail503))
	}
	for _, p := range procs {
		eventually(t, p.name+" sees the breaker open", p.isOpen)
	}
	clk.Advance(time.Minute)

	const callsPerProc = 8
	var (
		provider counter
		release  = make(chan struct{})
		wg       sync.WaitGroup
		mu       sync.Mutex
		results  []error
	)
	probe := func() error {
		<-release // the probe stays in flight until every other call is done
		return nil
	}
	for _, p := range procs {
		for range callsPerProc {
			wg.Go(func() {
				err := p.call(provider.wrap(probe))
				mu.Lock()
				results = append(results, err)
				mu.Unlock()
			})
		}
	}
	eventually(t, "every call but the probe is rejected", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(results) == 3*callsPerProc-1
	})
	assert.Equal(t, int64(1), provider.n.Load(), "exactly one attempt reached the provider")
	for _, err := range results {
		require.ErrorIs(t, err, retry.ErrCircuitOpen)
		var oe *OpenError
		require.ErrorAs(t, err, &oe)
		assert.Equal(t, breaker.HalfOpen, oe.State)
	}
	close(release)
	wg.Wait()
	require.NoError(t, errors.Join(results[len(results)-1]), "the probe succeeded")
	for _, p := range procs {
		eventually(t, p.name+" sees the breaker closed", func() bool { return !p.isOpen() })
	}
	for _, p := range procs {
		require.NoError(t, p.call(succeed))
	}
}

// A failed probe reopens the breaker for everyone with a fresh cooldown.
func TestFailedProbeReopensForAll(t *testing.T) {
	srv := natstest.Start(t)
	clk := testkit.NewClockNow()
	pc := breakerConfig(1, time.Minute)
	a := startProc(t, srv.URL(), clk, "proc-a", pc)
	b := startProc(t, srv.URL(), clk, "proc-b", pc)
	require.Error(t, a.call(fail503))
	eventually(t, "b sees the breaker open", b.isOpen)
	clk.Advance(time.Minute)
	require.Error(t, b.call(fail503)) // b's probe fails
	eventually(t, "a sees the breaker reopened by b's probe", func() bool {
		u := a.fleet.upstream(upstreamKey)
		u.mu.Lock()
		defer u.mu.Unlock()
		return u.br.ok && u.br.rec.State == stateOpen && u.br.rec.By == "proc-b"
	})
	assert.True(t, a.isOpen())
	clk.Advance(time.Minute - time.Millisecond)
	assert.True(t, a.isOpen(), "a fresh cooldown")
}
