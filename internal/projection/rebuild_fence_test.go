package projection

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/topology"
)

// rebuildRun is a Rebuild started by a test on its own goroutine.
type rebuildRun struct {
	cancel context.CancelFunc
	done   chan error
}

func (e *env) startRebuild(cfg RebuildConfig) *rebuildRun {
	e.t.Helper()
	cfg.JS = e.js
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	r := &rebuildRun{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- Rebuild(ctx, cfg) }()
	e.t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// wait returns what Rebuild returned.
func (r *rebuildRun) wait(t *testing.T) error {
	t.Helper()
	return waitDone(t, r.done, "the rebuild")
}

// publishInChunks publishes ws a few at a time on its own goroutine and
// returns a function that waits until all are published.
func (e *env) publishInChunks(ws []wire) (wait func()) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < len(ws); i += 5 {
			e.publish(ws[i:min(i+5, len(ws))]...)
		}
	}()
	return wg.Wait
}

// A rebuild frozen at any point of its switch for longer than the lease
// TTL: the live aggregator takes the lease, finishes the switch itself and
// goes on with new events; then the rebuild resumes with its stale state.
// Nothing it writes then may count: it fails, and the ledger equals the
// model of every event.
func TestPausedRebuildCannotOverwrite(t *testing.T) {
	for _, point := range SwitchPoints {
		t.Run(string(point), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(41, uint64(len(point))))
			ws := genWorkload(t, rng, 4, 120)
			third := len(ws) / 3
			e := newEnv(t)
			projectWithBug(t, e, ws[:third])
			live := e.start(Config{InstanceID: "live", BatchSize: 11})
			waitPublished := e.publishInChunks(ws[third : 2*third])

			f := newFreezer(point)
			f.arm(false)
			r := e.startRebuild(RebuildConfig{BatchSize: 7, Faults: f.fault, Now: f.clock.Now})
			t.Cleanup(f.release)
			f.waitFrozen(t)
			require.Eventually(t, func() bool {
				switching, err := Switching(context.Background(), e.js)
				return live.agg.Leading() && err == nil && !switching
			}, 30*time.Second, 5*time.Millisecond, "the live aggregator never finished the switch")
			waitPublished()
			e.publish(ws[2*third:]...)
			e.waitCheckpoint(e.lastSeq())

			f.release()
			require.Error(t, r.wait(t), "a rebuild that lost its lease mid-switch cannot succeed")
			e.waitCheckpoint(e.lastSeq())
			// Leading is a snapshot: a renewal that waits behind a batch on
			// a busy machine can drop it for a moment, so wait for it.
			require.Eventually(t, live.agg.Leading, 30*time.Second, 5*time.Millisecond, "the live aggregator leads")
			e.requireLedger(buildModel(wireStored(ws)))
		})
	}
}

// One rebuild at a time: a second one is refused, with a message that
// says why, while the first lives; the first then ends right. Issue 15,
// case 3: whatever their TTLs: a second rebuild with a shorter
// --lease-ttl judged the first's claim by its own TTL, took it while it
// was renewed, and both ran at once. A claim is judged by its holder's.
func TestSecondRebuildRefused(t *testing.T) {
	tests := []struct {
		name          string
		first, second time.Duration
	}{
		{"same-ttl", time.Second, time.Second},
		{"shorter-ttl", 3 * time.Second, 300 * time.Millisecond},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(43, uint64(1+i)))
			ws := genWorkload(t, rng, 4, 80)
			e := newEnv(t)
			projectWithBug(t, e, ws)
			e.start(Config{InstanceID: "live", BatchSize: 11})

			hold := make(chan struct{})
			var once sync.Once
			first := e.startRebuild(RebuildConfig{LeaseTTL: tc.first, BatchSize: 7, Progress: func(phase string, _, _ uint64) {
				if phase == "project" {
					once.Do(func() { <-hold })
				}
			}})
			e.waitClaimed()
			second := e.startRebuild(RebuildConfig{LeaseTTL: tc.second, BatchSize: 7})
			err := second.wait(t)
			require.ErrorIs(t, err, ErrRebuildRunning)
			require.Contains(t, err.Error(), "rebuild-", "the message names the running rebuild")
			require.Contains(t, err.Error(), fmt.Sprintf("its TTL is %s", tc.first))
			close(hold)
			require.NoError(t, first.wait(t))
			e.waitCheckpoint(e.lastSeq())
			e.requireLedger(buildModel(wireStored(ws)))
		})
	}
}

// Two rebuilds at once, the first paused past its claim's TTL while
// projecting: the second takes the stale claim and switches the ledger;
// the first resumes, finds its claim gone and stops without writing.
func TestPausedRebuildLosesItsClaim(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 2))
	ws := genWorkload(t, rng, 4, 120)
	half := len(ws) / 2
	e := newEnv(t)
	projectWithBug(t, e, ws[:half])
	live := e.start(Config{InstanceID: "live", BatchSize: 11})

	f := newFreezer(FaultAfterRead) // in the first rebuild's scratch projection
	f.arm(false)
	first := e.startRebuild(RebuildConfig{BatchSize: 7, Faults: f.fault, Now: f.clock.Now})
	t.Cleanup(f.release)
	f.waitFrozen(t)
	waitPublished := e.publishInChunks(ws[half:])
	second := e.startRebuild(RebuildConfig{BatchSize: 5})
	require.NoError(t, second.wait(t))
	waitPublished()
	e.waitCheckpoint(e.lastSeq())

	f.release()
	err := first.wait(t)
	require.Error(t, err)
	e.waitCheckpoint(e.lastSeq())
	require.Eventually(t, live.agg.Leading, 10*time.Second, 5*time.Millisecond)
	e.requireLedger(buildModel(wireStored(ws)))
}

// A switch whose scratch copy is gone stops the aggregator with a clear
// error and never empties the ledger; a new rebuild then rebuilds it from
// the stream.
func TestIncompleteSwitchStopsAggregator(t *testing.T) {
	rng := rand.New(rand.NewPCG(47, 1))
	ws := genWorkload(t, rng, 4, 80)
	e := newEnv(t)
	projectWithBug(t, e, ws)
	before, beforeSess := e.ledger()

	// The rebuild dies right after recording its switch.
	err := Rebuild(context.Background(), RebuildConfig{JS: e.js, LeaseTTL: time.Second, BatchSize: 7,
		Faults: func(p FaultPoint) error {
			if p == FaultSwitchRecorded {
				return errors.New("killed")
			}
			return nil
		}})
	var crash crashError
	require.ErrorAs(t, err, &crash)
	switching, err := Switching(context.Background(), e.js)
	require.NoError(t, err)
	require.True(t, switching)
	// Someone deletes a scratch bucket.
	cp, err := readLiveCheckpoint(context.Background(), e.js)
	require.NoError(t, err)
	require.NoError(t, e.js.DeleteKeyValue(context.Background(), cp.Switch.Scratch.Requests))

	live := e.start(Config{InstanceID: "live"})
	err = live.waitStopped(t)
	require.ErrorIs(t, err, ErrSwitchIncomplete)
	require.ErrorIs(t, err, ErrInvariant)
	require.Contains(t, err.Error(), "aggregator rebuild")
	reqs, sess := e.ledger()
	require.Equal(t, before, reqs, "the ledger is not emptied")
	require.Equal(t, beforeSess, sess)

	e.rebuildToModel(ws, "live-2")
}

// rebuildToModel runs a rebuild to its end (it replaces a switch that
// cannot be finished), then a live aggregator named instance, and
// requires the ledger to be the model of ws.
func (e *env) rebuildToModel(ws []wire, instance string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(e.t, Rebuild(ctx, RebuildConfig{JS: e.js, LeaseTTL: time.Second, BatchSize: 7}))
	e.start(Config{InstanceID: instance})
	e.waitCheckpoint(e.lastSeq())
	e.requireLedger(buildModel(wireStored(ws)))
}

// A stream whose first events aged out cannot be rebuilt: the rebuild
// refuses before touching anything.
func TestRebuildRefusesAgedOutStream(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	require.NoError(t, e.js.DeleteStream(ctx, "LEDGER_ATTEMPTS"))
	tc := topology.Config{DuplicateWindow: 100 * time.Millisecond, MaxAge: 300 * time.Millisecond}
	s, err := topology.EnsureAttempts(ctx, e.js, tc)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(49, 1))
	e.publish(genWorkload(t, rng, 2, 10)...)
	require.Eventually(t, func() bool {
		info, err := s.Info(ctx)
		return err == nil && info.State.FirstSeq > 1
	}, 10*time.Second, 20*time.Millisecond)
	err = Rebuild(ctx, RebuildConfig{JS: e.js, Topology: tc, LeaseTTL: time.Second})
	require.ErrorIs(t, err, ErrStreamIncomplete)
	require.Contains(t, err.Error(), "cannot be replayed")
}

// A rebuild of an empty stream switches to an empty ledger at once.
func TestRebuildEmptyStream(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, Rebuild(ctx, RebuildConfig{JS: e.js, LeaseTTL: time.Second}))
	switching, err := Switching(ctx, e.js)
	require.NoError(t, err)
	require.False(t, switching)
}
