package projection

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
)

// sumEveryAttempt is the classic bug: every event is a new attempt, so
// retries re-sent and duplicates stored twice are all billed.
func sumEveryAttempt(r *Request, ev *events.Attempt) bool {
	r.Log = append(r.Log, entryOf(ev))
	r.derive()
	return true
}

// projectWithBug fills the live ledger with the buggy projection of ws.
func projectWithBug(t *testing.T, e *env, ws []wire) {
	t.Helper()
	e.publish(ws...)
	buggy := e.start(Config{InstanceID: "buggy", Apply: sumEveryAttempt, BatchSize: 13})
	e.waitCheckpoint(e.lastSeq())
	require.NoError(t, buggy.stop(t))
	reqs, _ := e.ledger()
	require.NotEqual(t, buildModel(wireStored(ws)).requests, reqs, "the bug must show in the ledger")
}

// The bug-fix story: a ledger projected by buggy code is rebuilt by the
// fixed code while the live aggregator runs and a publisher keeps
// publishing; afterwards it equals the model of every published event.
func TestRebuildWhileLiveAndPublishing(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	ws := genWorkload(t, rng, 6, 150)
	half := len(ws) / 2
	e := newEnv(t)
	projectWithBug(t, e, ws[:half])

	live := e.start(Config{InstanceID: "live", BatchSize: 17})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := half; i < len(ws); i += 5 {
			e.publish(ws[i:min(i+5, len(ws))]...)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, Rebuild(ctx, RebuildConfig{JS: e.js, LeaseTTL: 300 * time.Millisecond, BatchSize: 19}))
	wg.Wait()
	e.waitCheckpoint(e.lastSeq())
	require.Eventually(t, live.agg.Leading, 5*time.Second, 5*time.Millisecond, "the live aggregator resumes")
	e.requireLedger(buildModel(wireStored(ws)))

	// The scratch copy is gone.
	_, err := e.js.KeyValue(ctx, ScratchNames().Requests)
	require.Error(t, err)
}

// A rebuild interrupted while projecting leaves the live ledger serving
// untouched; one interrupted mid-switch is completed by the live
// aggregator from the scratch copy. Either way a new rebuild (or the live
// aggregator) ends in the same state.
func TestRebuildInterrupted(t *testing.T) {
	for _, phase := range []string{"project", "switch"} {
		t.Run(phase, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(21, uint64(len(phase))))
			ws := genWorkload(t, rng, 4, 120)
			e := newEnv(t)
			projectWithBug(t, e, ws)
			before, _ := e.ledger()

			live := e.start(Config{InstanceID: "live", BatchSize: 11})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			err := Rebuild(ctx, RebuildConfig{JS: e.js, LeaseTTL: 300 * time.Millisecond, BatchSize: 7,
				Progress: func(p string, applied, last uint64) {
					if strings.HasPrefix(p, phase) && applied > 0 {
						cancel()
					}
				}})
			require.True(t, errors.Is(err, context.Canceled), "got %v", err)

			if phase == "project" {
				reqs, _ := e.ledger()
				require.Equal(t, before, reqs, "an interrupted projection phase leaves the live ledger as it was")
				require.NoError(t, Rebuild(context.Background(), RebuildConfig{JS: e.js, LeaseTTL: 300 * time.Millisecond}))
			}
			// Mid-switch: the yield request goes stale, the live aggregator
			// takes the lease back and finishes the switch itself.
			require.Eventually(t, func() bool {
				_, err := e.js.KeyValue(context.Background(), StateBucket)
				if err != nil {
					return false
				}
				kv, _ := e.js.KeyValue(context.Background(), StateBucket)
				_, err = kv.Get(context.Background(), switchKey)
				return live.agg.Leading() && err != nil
			}, 10*time.Second, 5*time.Millisecond)
			e.waitCheckpoint(e.lastSeq())
			e.requireLedger(buildModel(wireStored(ws)))
		})
	}
}
