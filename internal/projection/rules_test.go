package projection

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/testkit"
)

// A rolling deploy in both directions: a newer build takes over and
// moves the ledger to its rules; an older build that takes the lease then
// refuses to write, says to upgrade and lets the lease go; the newer build
// carries on. Nothing is lost or counted twice.
func TestOlderRulesRefuseToWrite(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 1))
	ws := genWorkload(t, rng, 4, 90)
	third := len(ws) / 3
	e := newEnv(t)
	old := e.start(Config{InstanceID: "old", Rules: 1, BatchSize: 9})
	e.publish(ws[:third]...)
	e.waitCheckpoint(e.lastSeq())
	require.NoError(t, old.stop(t))

	// Roll forward.
	newer := e.start(Config{InstanceID: "new", Rules: 2, BatchSize: 9})
	e.publish(ws[third : 2*third]...)
	e.waitCheckpoint(e.lastSeq())
	rules, err := LedgerRules(context.Background(), e.js)
	require.NoError(t, err)
	require.Equal(t, 2, rules)
	require.NoError(t, newer.stop(t))

	// Roll back: the older build refuses.
	e.publish(ws[2*third:]...)
	back := e.start(Config{InstanceID: "old-again", Rules: 1, BatchSize: 9})
	err = back.waitStopped(t)
	require.ErrorIs(t, err, ErrRulesTooOld)
	require.Contains(t, err.Error(), "upgrade")
	cp, err := ReadCheckpoint(context.Background(), e.js)
	require.NoError(t, err)
	require.Less(t, cp, e.lastSeq(), "the older build wrote nothing")

	// The newer build takes over at once (the lease was let go).
	e.start(Config{InstanceID: "new-again", Rules: 2, BatchSize: 9})
	e.waitCheckpoint(e.lastSeq())
	e.requireLedger(buildModel(wireStored(ws)))
}

// A rebuild by newer rules moves the ledger to them; an older live
// aggregator that takes the lease after the switch refuses to write
// instead of mixing two rule sets.
func TestOlderRulesRefuseAfterSwitch(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 2))
	ws := genWorkload(t, rng, 3, 60)
	e := newEnv(t)
	e.publish(ws...)
	live := e.start(Config{InstanceID: "live", Rules: 1, BatchSize: 9})
	e.waitCheckpoint(e.lastSeq())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, Rebuild(ctx, RebuildConfig{JS: e.js, LeaseTTL: time.Second, Rules: 2}))
	err := live.waitStopped(t)
	require.ErrorIs(t, err, ErrRulesTooOld)
	rules, err := LedgerRules(context.Background(), e.js)
	require.NoError(t, err)
	require.Equal(t, 2, rules)
	e.requireLedger(buildModel(wireStored(ws)))
}

// heldRenewals holds every lease renewal while held is set, and the end
// of the holder's term, so that a test can look at the ledger then.
type heldRenewals struct {
	mu    sync.Mutex
	held  bool
	gate  chan struct{}
	ended chan struct{} // closed when a term ends while held
}

func (h *heldRenewals) hold() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held, h.gate, h.ended = true, make(chan struct{}), make(chan struct{})
}

func (h *heldRenewals) let() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held {
		h.held = false
		close(h.gate)
	}
}

func (h *heldRenewals) fault(p FaultPoint) error {
	h.mu.Lock()
	held, gate := h.held, h.gate
	if held && p == FaultTermEnd {
		select {
		case <-h.ended:
		default:
			close(h.ended)
		}
	}
	h.mu.Unlock()
	if held && (p == FaultRenew || p == FaultTermEnd) {
		<-gate
	}
	return nil
}

// A holder whose renewals stall sends no write once its lease may have
// lapsed (two thirds of the TTL after its last renewal was sent), even
// though nobody has taken the lease over: its batch fails before sending
// anything, and the events are applied once it holds the lease again.
func TestNoWriteOnceTheLeaseMayHaveLapsed(t *testing.T) {
	clock := testkit.NewRealClock() // moved by hand, on top of real time
	var h heldRenewals
	e := newEnv(t)
	ttl := 3 * time.Second
	a := e.start(Config{InstanceID: "a", LeaseTTL: ttl, Now: clock.Now, Faults: h.fault})
	w := func(n int) wire {
		return evSpec{n: n, session: "S1", request: "R1", attempt: n, in: 10}.wire(t)
	}
	e.publish(w(0))
	e.waitCheckpoint(e.lastSeq())
	require.True(t, a.agg.Leading())
	before, beforeSess := e.ledger()

	h.hold()
	t.Cleanup(h.let)
	clock.Advance(ttl) // the last renewal is a TTL old on the holder's clock
	e.publish(w(1))
	select {
	case <-h.ended:
	case <-time.After(30 * time.Second):
		t.Fatal("the holder kept its term on a lease it cannot prove it holds")
	}
	cp, err := ReadCheckpoint(context.Background(), e.js)
	require.NoError(t, err)
	require.Less(t, cp, e.lastSeq(), "nothing may be written")
	reqs, sess := e.ledger()
	require.Equal(t, before, reqs)
	require.Equal(t, beforeSess, sess)

	h.let()
	e.waitCheckpoint(e.lastSeq())
	e.requireLedger(buildModel([]wire{w(0), w(1)}))
}
