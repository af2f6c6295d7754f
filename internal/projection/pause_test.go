package projection

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/testkit"
)

// waitDelivered waits until the stream's consumers have delivered every
// message up to seq (the aggregator's ordered consumer is the only one).
func (e *env) waitDelivered(seq uint64) {
	e.t.Helper()
	ctx := context.Background()
	s, err := e.js.Stream(ctx, names.AttemptsStream)
	require.NoError(e.t, err)
	require.Eventually(e.t, func() bool {
		l := s.ListConsumers(ctx)
		for ci := range l.Info() {
			if ci.Delivered.Stream >= seq {
				return true
			}
		}
		return false
	}, 30*time.Second, 2*time.Millisecond, "messages up to %d never delivered", seq)
}

// freezer freezes an aggregator at one point of a batch, as a GC pause,
// SIGSTOP or a partition would: once the point is reached, every seam
// call (batch points and lease renewals alike) blocks until release, and
// the holder's clock stands still, so on resuming it believes no time has
// passed and its lease is still good.
type freezer struct {
	point FaultPoint
	// holdCommits keeps the armed holder's commits waiting until it
	// freezes, so that batch N is still in flight when N+1 is prepared.
	holdCommits bool

	mu       sync.Mutex
	armed    bool
	gate     chan struct{} // while armed, the first gather waits for it
	gated    bool
	frozen   chan struct{}  // closed when the point is reached
	released chan struct{}  // closed by release
	renewals chan struct{}  // closed when the resumed holder's batch is done
	clock    *testkit.Clock // the holder's: real time, frozen with it
}

func newFreezer(point FaultPoint) *freezer {
	return &freezer{point: point, holdCommits: point == FaultNextPrepared,
		frozen: make(chan struct{}), released: make(chan struct{}), gate: make(chan struct{}),
		renewals: make(chan struct{}), clock: testkit.NewRealClock()}
}

// arm freezes the holder at the point's next call. With gather set, the
// holder's next batch first waits at FaultGather until openGate, so that
// everything published meanwhile lands in that one batch.
func (f *freezer) arm(gather bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed, f.gated = true, gather
}

func (f *freezer) openGate() { close(f.gate) }

// fault is the aggregator's Faults seam. After release, renewals stay
// held until the resumed holder's batch has committed or its term has
// ended: the worst case, where the stale batch sends everything it can
// before the lease keeper notices the takeover.
func (f *freezer) fault(p FaultPoint) error {
	f.mu.Lock()
	resumed := f.isReleased()
	switch {
	case resumed && (p == FaultAfterCheckpoint || p == FaultTermEnd):
		select {
		case <-f.renewals:
		default:
			close(f.renewals)
		}
		f.mu.Unlock()
		return nil
	case resumed && p == FaultRenew:
		f.mu.Unlock()
		<-f.renewals
		return nil
	case f.isFrozen():
	case f.armed && p == f.point:
		f.armed = false
		f.clock.Freeze()
		close(f.frozen)
	case f.armed && f.gated && p == FaultGather:
		f.gated = false
		f.mu.Unlock()
		<-f.gate
		return nil
	case f.armed && f.holdCommits && p == FaultBeforeWrites:
		f.mu.Unlock()
		<-f.frozen
		<-f.released
		return nil
	default:
		f.mu.Unlock()
		return nil
	}
	f.mu.Unlock()
	<-f.released
	if p == FaultRenew {
		<-f.renewals
	}
	return nil
}

func (f *freezer) isReleased() bool {
	select {
	case <-f.released:
		return true
	default:
		return false
	}
}

func (f *freezer) isFrozen() bool {
	select {
	case <-f.frozen:
		select {
		case <-f.released:
			return false
		default:
			return true
		}
	default:
		return false
	}
}

func (f *freezer) waitFrozen(t *testing.T) {
	t.Helper()
	select {
	case <-f.frozen:
	case <-time.After(30 * time.Second):
		t.Fatalf("the holder never reached %s", f.point)
	}
}

func (f *freezer) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.isFrozen() {
		select {
		case <-f.renewals:
		default:
			close(f.renewals)
		}
		return
	}
	f.clock.Thaw()
	close(f.released)
}

// pauseWorkload is four waves of events over two sessions. Wave 2 is
// what the frozen holder has in hand: first attempts of requests it has
// not seen, then further attempts of those and of requests it has cached,
// all in sessions it has cached. Waves 3 and 4 touch the same requests
// and sessions again.
func pauseWorkload(t *testing.T) (w1, w2, w3, w4 []wire) {
	t.Helper()
	n := 0
	ev := func(session, request string, attempt int, success bool, in, out int64) wire {
		n++
		return evSpec{n: n, session: session, request: request, attempt: attempt, success: success, in: in, out: out}.wire(t)
	}
	w1 = []wire{ev("S1", "R1", 0, false, 100, 0), ev("S2", "R2", 0, false, 200, 0),
		ev("S1", "R3", 0, false, 300, 0), ev("S2", "R4", 0, false, 400, 0)}
	w2 = []wire{ev("S1", "R5", 0, false, 500, 0), ev("S2", "R6", 0, false, 600, 0), ev("S1", "R1", 1, true, 100, 10),
		ev("S1", "R5", 1, true, 500, 50), ev("S2", "R6", 1, true, 600, 60), ev("S2", "R2", 1, true, 200, 20)}
	w3 = []wire{ev("S1", "R7", 0, true, 700, 70), ev("S2", "R8", 0, false, 800, 0),
		ev("S1", "R3", 1, true, 300, 30), ev("S2", "R6", 2, true, 600, 66)}
	w4 = []wire{ev("S2", "R4", 1, true, 400, 40), ev("S2", "R8", 1, true, 800, 80),
		ev("S1", "R10", 0, true, 1000, 100), ev("S1", "R5", 2, true, 500, 55)}
	return w1, w2, w3, w4
}

// A holder frozen at any point of a batch for longer than the lease TTL
// resumes with its stale state while another instance has taken over and
// committed part of the same batch (the case: A holds (100,140],
// B commits (100,130] and is itself paused, A resumes): nothing A writes
// then may count. B then resumes and goes on over the same requests and
// sessions; the ledger equals the model of every event.
func TestPausedHolderCannotCountTwice(t *testing.T) {
	for _, point := range PausePoints {
		t.Run(string(point), func(t *testing.T) {
			w1, w2, w3, w4 := pauseWorkload(t)
			e := newEnv(t)
			// A first term writes one record, so that A's term does not
			// start on empty buckets (where it knows absent keys without
			// reading them).
			w0 := evSpec{n: 100, session: "S0", request: "R0", attempt: 0, success: true, in: 1, out: 1}.wire(t)
			e.publish(w0)
			z := e.start(Config{InstanceID: "z"})
			e.waitCheckpoint(1)
			require.NoError(t, z.stop(t))
			fa := newFreezer(point)
			batch := 64
			if point == FaultNextPrepared {
				batch = 2
			}
			a := e.start(Config{InstanceID: "a", BatchSize: batch, LeaseTTL: time.Second, Faults: fa.fault, Now: fa.clock.Now})
			t.Cleanup(fa.release) // before a's own cleanup waits for it
			e.publish(w1...)
			e.waitCheckpoint(e.lastSeq())
			require.True(t, a.agg.Leading())

			// Wave 2 lands in one batch of A's (with batches of 2, the
			// consumer holds too few messages to wait for them all).
			gather := point != FaultNextPrepared
			fa.arm(gather)
			e.publish(w2...)
			if gather {
				e.waitDelivered(e.lastSeq())
				fa.openGate()
			}
			fa.waitFrozen(t)
			// B takes over, commits its first batch of wave 2 and freezes.
			fb := newFreezer(FaultAfterCheckpoint)
			fb.arm(false)
			b := e.start(Config{InstanceID: "b", BatchSize: 3, LeaseTTL: time.Second, Faults: fb.fault, Now: fb.clock.Now})
			t.Cleanup(fb.release)
			fb.waitFrozen(t)
			require.True(t, b.agg.Leading())

			// A resumes with its stale state and does what it can.
			fa.release()
			require.Eventually(t, func() bool { return !a.agg.Leading() }, 30*time.Second, 5*time.Millisecond,
				"the resumed holder never noticed it lost the lease")
			fb.release()
			e.publish(w3...)
			e.publish(w4...)
			e.waitCheckpoint(e.lastSeq())
			all := append(append(append(append([]wire{w0}, w1...), w2...), w3...), w4...)
			e.requireLedger(buildModel(wireStored(all)))
		})
	}
}
