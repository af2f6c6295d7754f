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
	"github.com/agentledger/ledger/internal/names"
)

// sumEveryAttempt is the classic bug: every event is a new attempt, so
// retries re-sent and duplicates stored twice are all billed.
func sumEveryAttempt(r *Request, ev *events.Attempt) bool {
	r.Log = append(r.Log, r.entryOf(ev, nil))
	r.derive()
	return true
}

// projectWithBug fills the live ledger with the buggy projection of ws,
// which must show the bug.
func projectWithBug(t *testing.T, e *env, ws []wire) {
	t.Helper()
	projectBuggy(t, e, ws)
	reqs, _ := e.ledger()
	require.NotEqual(t, buildModel(wireStored(ws)).requests, reqs, "the bug must show in the ledger")
}

// projectBuggy fills the live ledger with the buggy projection of ws.
func projectBuggy(t *testing.T, e *env, ws []wire) {
	t.Helper()
	e.publish(ws...)
	buggy := e.start(Config{InstanceID: "buggy", Apply: sumEveryAttempt, BatchSize: 13})
	e.waitCheckpoint(e.lastSeq())
	require.NoError(t, buggy.stop(t))
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
	require.NoError(t, Rebuild(ctx, RebuildConfig{JS: e.js, LeaseTTL: time.Second, BatchSize: 19}))
	wg.Wait()
	e.waitCheckpoint(e.lastSeq())
	require.Eventually(t, live.agg.Leading, 5*time.Second, 5*time.Millisecond, "the live aggregator resumes")
	e.requireLedger(buildModel(wireStored(ws)))

	// The scratch set is deleted.
	sets, err := scratchSets(ctx, e.js)
	require.NoError(t, err)
	require.Empty(t, sets)
}

// A rebuild interrupted at any point — while projecting, while catching up
// under the live lease, in the middle of copying any bucket — leaves a
// ledger that is served, and whatever runs next (the rebuild started
// again, or the live aggregator alone) ends in the same state: the model
// of every event.
func TestRebuildInterrupted(t *testing.T) {
	tests := []struct {
		phase   string // the progress phase at which the rebuild is stopped
		restart bool   // start the rebuild again; else the live aggregator finishes alone
		// untouched: the live ledger is still the buggy one after the stop.
		untouched bool
	}{
		{phase: "project", restart: true, untouched: true},
		{phase: "final", restart: true, untouched: true},
		{phase: "final", restart: false, untouched: true},
		{phase: "switch " + names.RequestsBucket, restart: true},
		{phase: "switch " + names.RequestsBucket, restart: false},
		{phase: "switch " + names.SessionsBucket, restart: true},
		{phase: "switch " + names.SessionsBucket, restart: false},
		{phase: "switch " + names.RollupsBucket, restart: true},
		{phase: "switch " + names.RollupsBucket, restart: false},
	}
	for i, tc := range tests {
		name := strings.ReplaceAll(tc.phase, " ", "-")
		if tc.restart {
			name += "/restarted"
		} else {
			name += "/live-alone"
		}
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(21, uint64(i)))
			ws := genWorkload(t, rng, 4, 120)
			e := newEnv(t)
			projectWithBug(t, e, ws)
			before, _ := e.ledger()

			live := e.start(Config{InstanceID: "live", BatchSize: 11})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			err := Rebuild(ctx, RebuildConfig{JS: e.js, LeaseTTL: time.Second, BatchSize: 7,
				Progress: func(p string, applied, last uint64) {
					if p == tc.phase && applied > 0 {
						cancel()
					}
				}})
			require.True(t, errors.Is(err, context.Canceled), "got %v", err)
			if tc.untouched {
				reqs, _ := e.ledger()
				require.Equal(t, before, reqs, "stopped before the switch, the live ledger is as it was")
			}
			if tc.restart {
				rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
				defer rcancel()
				require.NoError(t, Rebuild(rctx, RebuildConfig{JS: e.js, LeaseTTL: time.Second}))
			}
			// A switch left half done is finished by whoever holds the lease
			// next; then the live aggregator serves again.
			require.Eventually(t, func() bool {
				switching, err := Switching(context.Background(), e.js)
				return live.agg.Leading() && err == nil && !switching
			}, 10*time.Second, 5*time.Millisecond)
			e.waitCheckpoint(e.lastSeq())
			if tc.untouched && !tc.restart {
				reqs, _ := e.ledger()
				require.Equal(t, before, reqs, "without a switch the live ledger stays as it was")
				return
			}
			e.requireLedger(buildModel(wireStored(ws)))
		})
	}
}
