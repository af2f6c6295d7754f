package fleet

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/retry"
	"github.com/agentledger/ledger/internal/testkit"
)

// breakerOf is p's mirror of the fleet's breaker record.
func (p *proc) breakerOf() (breakerRecord, bool) {
	u := p.fleet.upstream(upstreamKey)
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.br.rec, u.br.ok
}

// twoProcs starts processes a and b of a fleet with pc, on a test clock.
func twoProcs(t *testing.T, pc procConfig) (*testkit.Clock, *proc, *proc) {
	t.Helper()
	srv := natstest.Start(t)
	clk := testkit.NewClockNow()
	return clk, startProc(t, srv.URL(), clk, "proc-a", pc), startProc(t, srv.URL(), clk, "proc-b", pc)
}

// probeReady starts processes a and b with pc (a threshold of 1, a
// cooldown of a minute), opens the fleet's breaker with b's failure and
// moves the clock past the cooldown: the next call probes.
func probeReady(t *testing.T, pc procConfig) (*testkit.Clock, *proc, *proc) {
	t.Helper()
	clk, a, b := twoProcs(t, pc)
	require.Error(t, b.call(fail503))
	for _, p := range []*proc{a, b} {
		eventually(t, p.name+" sees the breaker open", p.isOpen)
	}
	clk.Advance(pc.guards.Breaker.Cooldown)
	return clk, a, b
}

// inFlight starts a call of p whose attempt blocks until release is
// closed; it returns when the attempt is under way, and the call's error
// arrives on the returned channel.
func inFlight(p *proc, release chan struct{}) <-chan error {
	started, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- p.call(func() error {
			close(started)
			<-release
			return nil
		})
	}()
	<-started
	return done
}

// A probe's success reported just before Close is in the fleet's record:
// the other processes see the breaker closed (it was queued for the
// maintainer, whose context Close cancelled first: the record stayed
// half-open, held by a process that was gone).
func TestProbeSuccessJustBeforeCloseIsWritten(t *testing.T) {
	_, a, b := probeReady(t, breakerConfig(1, time.Minute))

	require.NoError(t, a.call(succeed), "a's probe succeeds")
	a.fleet.Close()
	eventually(t, "b sees the breaker closed by a's probe", func() bool {
		rec, ok := b.breakerOf()
		return ok && rec.State == stateClosed && rec.By == "proc-a"
	})
	require.NoError(t, b.call(succeed))
}

// What a process owes the fleet at Close is written: a failure reported
// just before it counts.
func TestFailureReportedJustBeforeCloseCounts(t *testing.T) {
	_, a, b := twoProcs(t, breakerConfig(5, time.Minute))
	require.Error(t, a.call(fail503))
	a.fleet.Close()
	eventually(t, "b sees a's failure counted", func() bool {
		rec, ok := b.breakerOf()
		return ok && rec.Failures == 1
	})
}

// A process that closes while its probe is under way gives the probe up:
// another process probes at once, without waiting for the claim to run
// out (a gateway replica stopped in a deploy wedged every other replica
// for a cooldown).
func TestClosedProcessReleasesItsProbe(t *testing.T) {
	_, a, b := probeReady(t, refusing(breakerConfig(1, time.Minute)))

	release := make(chan struct{})
	done := inFlight(a, release)
	eventually(t, "b sees a's probe", func() bool {
		rec, ok := b.breakerOf()
		return ok && rec.State == stateHalfOpen && rec.Probe == "proc-a"
	})
	require.ErrorIs(t, b.call(succeed), retry.ErrCircuitOpen, "a's probe is in flight")
	a.fleet.Close()
	eventually(t, "b may probe", func() bool { return !b.isOpen() })
	require.NoError(t, b.call(succeed), "b's probe, at once")
	rec, _ := b.breakerOf()
	assert.Equal(t, stateClosed, rec.State)
	close(release)
	<-done
}

// A probe that takes longer than the cooldown (a long LLM call) keeps its
// claim for the attempt timeout: no other process probes meanwhile, and
// its result, when it comes, closes the breaker (it used to be taken over
// after a cooldown, and its result dropped by the generation check).
func TestProbeLongerThanCooldownKeepsItsClaim(t *testing.T) {
	pc := refusing(breakerConfig(1, time.Minute))
	pc.guards.AttemptTimeout = 5 * time.Minute
	clk, a, b := probeReady(t, pc)

	release := make(chan struct{})
	done := inFlight(a, release)
	clk.Advance(3 * time.Minute) // three cooldowns into the probe
	var provider counter
	err := b.call(provider.wrap(succeed))
	require.ErrorIs(t, err, retry.ErrCircuitOpen)
	var oe *OpenError
	require.True(t, errors.As(err, &oe))
	assert.Equal(t, "proc-a", oe.Probe)
	assert.Zero(t, provider.n.Load(), "no second probe")
	close(release)
	require.NoError(t, <-done)
	eventually(t, "b sees the breaker closed by a's probe", func() bool {
		rec, ok := b.breakerOf()
		return ok && rec.State == stateClosed && rec.By == "proc-a"
	})
}

// A call that finds the fleet's probe in flight waits for its verdict
// rather than fail on a breaker about to close (a healthy run that
// followed a run ended mid-outage had scores of circuit_open calls), and
// goes on once the probe succeeded.
func TestCallWaitsForTheProbe(t *testing.T) {
	clk, a, b := probeReady(t, breakerConfig(1, time.Minute))
	release := make(chan struct{})
	done := inFlight(a, release)
	waiting := clk.Now()
	var provider counter
	called := make(chan error, 1)
	go func() { called <- b.call(provider.wrap(succeed)) }()
	eventually(t, "b waits", func() bool { return clk.Now().Sub(waiting) >= 3*retry.ProbePoll })
	close(release)
	require.NoError(t, <-done)
	require.NoError(t, <-called, "b waited for a's probe, then called")
	assert.Equal(t, int64(1), provider.n.Load())
	evs := b.sink.Events()
	require.Len(t, evs, 2, "b's failure that opened the breaker, then its call's one attempt: no circuit_open")
	assert.Nil(t, evs[1].Error)
}
