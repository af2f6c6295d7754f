package projection

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/topology"
)

// gate stops a rebuild the first time it reaches one point, until opened;
// unlike freezer, its clock and its renewals go on, as for a rebuild that
// is merely slow there.
type gate struct {
	point   FaultPoint
	once    sync.Once
	reached chan struct{}
	open    chan struct{}
}

func newGate(point FaultPoint) *gate {
	return &gate{point: point, reached: make(chan struct{}), open: make(chan struct{})}
}

func (g *gate) fault(p FaultPoint) error {
	if p != g.point {
		return nil
	}
	first := false
	g.once.Do(func() { first = true })
	if first {
		close(g.reached)
		<-g.open
	}
	return nil
}

func (g *gate) waitReached(t *testing.T) {
	t.Helper()
	select {
	case <-g.reached:
	case <-time.After(30 * time.Second):
		t.Fatalf("the rebuild never reached %s", g.point)
	}
}

func (g *gate) release() {
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

// waitClaimed waits until a rebuild holds the claim.
func (e *env) waitClaimed() {
	e.t.Helper()
	require.Eventually(e.t, func() bool {
		state, err := e.js.KeyValue(context.Background(), names.StateBucket)
		if err != nil {
			return false
		}
		_, err = state.Get(context.Background(), names.RebuildKey)
		return err == nil
	}, 30*time.Second, 5*time.Millisecond)
}

// Issue 15, case 1: rebuild A projects, pauses past its claim; rebuild B
// claims and prepares its scratch ledger; A resumes and commits the batch
// it had prepared. With one shared scratch set, purged by B, A's writes
// of new keys and its rejections matched the purged streams' last
// sequences and landed in B's scratch before B's fences: B then took A's
// last rejection for the floor of what was recorded and lost the earlier
// ones, and counted requests twice or stopped with ErrInvariant. Each
// rebuild owns its scratch set now: nothing A sends reaches B's, and the
// ledger equals the model.
func TestStaleRebuildWriterCannotReachAnotherScratch(t *testing.T) {
	rng := rand.New(rand.NewPCG(151, 1))
	ws := wireStored(genWorkload(t, rng, 12, 120))
	// A rejection in A's first batch of 10 and one in its second.
	bad := func(r string) wire {
		return wire{subject: "ledger.attempts.sx." + r, data: []byte(`{"schema":"ledger.attempt.v1","attempt":"zero"}`)}
	}
	ws = slices.Insert(ws, 13, bad("rx2"))
	ws = slices.Insert(ws, 2, bad("rx1"))
	half := len(ws) / 2
	e := newEnv(t)
	projectWithBug(t, e, ws[:half])
	live := e.start(Config{InstanceID: "live", BatchSize: 11})

	fa := newFreezer(FaultAfterCheckpoint) // A committed its first batch and prepared the second
	fa.arm(false)
	a := e.startRebuild(RebuildConfig{BatchSize: 10, Faults: fa.fault, Now: fa.clock.Now})
	t.Cleanup(fa.release)
	fa.waitFrozen(t)
	waitPublished := e.publishInChunks(ws[half:])

	gb := newGate(FaultScratchReady) // B has its claim and its scratch set
	b := e.startRebuild(RebuildConfig{BatchSize: 5, Faults: gb.fault})
	t.Cleanup(gb.release)
	gb.waitReached(t)

	fa.release() // A sends its stale batch, its term ends, it finds its claim gone
	require.Error(t, a.wait(t), "a rebuild that lost its claim cannot succeed")
	gb.release()
	require.NoError(t, b.wait(t))
	waitPublished()
	e.waitCheckpoint(e.lastSeq())
	require.Eventually(t, live.agg.Leading, 10*time.Second, 5*time.Millisecond)
	e.requireLedger(buildModel(ws))
	sets, err := scratchSets(context.Background(), e.js)
	require.NoError(t, err)
	require.Empty(t, sets, "no scratch set is left behind")
}

// Issue 15, case 2: rebuild A pauses between its claim and preparing its
// scratch; rebuild B runs and starts its switch; A resumes in the middle
// of B's copy. A purged the shared scratch then, and B's copy, trusting
// the scratch after one check, deleted every live session and rejection
// it no longer found, and reported success. A deletes no scratch set a
// recorded switch refers to or another claim owns now, so B's copy is
// whole.
func TestStaleRebuildCannotEmptyASwitch(t *testing.T) {
	rng := rand.New(rand.NewPCG(151, 2))
	ws := genWorkload(t, rng, 4, 120)
	e := newEnv(t)
	projectWithBug(t, e, ws)
	live := e.start(Config{InstanceID: "live", BatchSize: 11})

	// A stops between its claim and its scratch, renewals and all, until
	// resumed; once resumed it acts, and its renewals go on only after it
	// has acted: it dies once it has prepared its scratch (so that it does
	// not fill it again), or it ends.
	reached, resume, acted := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var reachOnce, actOnce sync.Once
	act := func() { actOnce.Do(func() { close(acted) }) }
	faultA := func(p FaultPoint) error {
		switch p {
		case FaultRebuildClaimed:
			reachOnce.Do(func() { close(reached) })
			<-resume
		case FaultRenew:
			<-acted
		case FaultScratchReady:
			act()
			return errors.New("killed")
		case FaultRebuildEnd:
			act()
		}
		return nil
	}
	a := e.startRebuild(RebuildConfig{BatchSize: 7, Faults: faultA})
	t.Cleanup(act)
	select {
	case <-reached:
	case <-time.After(30 * time.Second):
		t.Fatal("rebuild A never took its claim")
	}

	gb := newGate(FaultSwitchCopy) // B has copied the requests, not the sessions
	b := e.startRebuild(RebuildConfig{BatchSize: 5, Faults: gb.fault})
	t.Cleanup(gb.release)
	gb.waitReached(t)

	close(resume)
	<-acted
	gb.release()
	require.NoError(t, b.wait(t))
	require.Error(t, a.wait(t), "a rebuild that lost its claim cannot succeed")
	e.waitCheckpoint(e.lastSeq())
	require.Eventually(t, live.agg.Leading, 10*time.Second, 5*time.Millisecond)
	e.requireLedger(buildModel(wireStored(ws)))
}

// A switch whose scratch copy changes under it (here: emptied between two
// chunks of the copy, by whatever means) stops and says so before it
// deletes or purges anything from the live ledger; a new rebuild then
// replaces the switch.
func TestSwitchNeverDeletesFromAnUncheckedScratch(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(151, 3))
	ws := genWorkload(t, rng, 4, 120)
	e := newEnv(t)
	projectWithBug(t, e, ws)
	_, sessBefore := e.ledger()
	rejBefore := e.rejections()
	require.NotEmpty(t, rejBefore, "the workload has rejections")

	g := newGate(FaultSwitchCopy)
	r := e.startRebuild(RebuildConfig{BatchSize: 7, Faults: g.fault})
	t.Cleanup(g.release)
	g.waitReached(t)
	cp, err := readLiveCheckpoint(ctx, e.js)
	require.NoError(t, err)
	require.NotNil(t, cp.Switch)
	for _, name := range []string{"KV_" + cp.Switch.Scratch.Sessions, cp.Switch.Scratch.Rejected} {
		s, err := e.js.Stream(ctx, name)
		require.NoError(t, err)
		require.NoError(t, s.Purge(ctx))
	}
	g.release()
	err = r.wait(t)
	require.ErrorIs(t, err, ErrSwitchIncomplete)
	_, sess := e.ledger()
	require.Equal(t, sessBefore, sess, "no live session is deleted")
	require.Equal(t, rejBefore, e.rejections(), "no live rejection is purged")

	e.rebuildToModel(ws, "live")
}

// The live lease too is judged by its holder's TTL: a standby with a TTL
// a thirtieth of the holder's took it over while it was renewed (the TTL
// a lease named was ignored when over ten times the standby's own).
func TestLeaseJudgedByTheHolderTTL(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	res, err := openResources(ctx, e.js, topology.Config{}, LiveNames(), nil)
	require.NoError(t, err)
	holder := &lease{kv: res.state, holder: "long", ttl: 3 * time.Second, now: time.Now}
	require.NoError(t, holder.acquire(ctx, 10*time.Millisecond))
	kctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = holder.keep(kctx) }()

	standby := &lease{kv: res.state, holder: "short", ttl: 100 * time.Millisecond, now: time.Now}
	actx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	err = standby.acquire(actx, 10*time.Millisecond)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the standby took a lease renewed within its holder's TTL")
}

// Issue 15, case 4: the live aggregator finishing an interrupted switch
// used the rejection floor it read before the switch, so a rejection the
// scratch ledger held past its checkpoint (recorded by a batch that never
// committed) was recorded a second time.
func TestRejectionFloorReadAfterTheSwitch(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	var ws []wire
	for n := 1; n <= 11; n++ {
		w := evSpec{n: n, session: "S", request: fmt.Sprintf("R%d", n%5), attempt: n / 5, success: true, in: 100, out: 10}.wire(t)
		if n == 9 {
			w = wire{subject: "ledger.attempts.S.R9", data: []byte(`{"schema":"ledger.attempt.v1","attempt":"zero"}`)}
		}
		ws = append(ws, w)
	}
	e.publish(ws...)

	// A rebuild's scratch projection records the rejection of 9 and dies
	// before the batch holding it commits.
	sn := ScratchNames(ulid.Make().String())
	s := e.start(Config{Names: sn, InstanceID: "scratch", BatchSize: 4, Faults: func(p FaultPoint) error {
		if p == FaultBetweenRejectsPut {
			return errors.New("killed")
		}
		return nil
	}})
	var crash crashError
	require.ErrorAs(t, s.waitStopped(t), &crash)
	scratch, err := lookupResources(ctx, e.js, sn)
	require.NoError(t, err)
	scp, _, err := readCheckpoint(ctx, scratch.state)
	require.NoError(t, err)
	require.Less(t, scp.Seq, uint64(9))
	// Its switch is recorded, as a rebuild does, and interrupted.
	sw := &switchRecord{Checkpoint: scp.Seq, Scratch: sn, Rules: RulesVersion, AllGrains: scp.AllGrains}
	sw.Requests, sw.Sessions, sw.Rejected, sw.Rollups, err = scratch.counts(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), sw.Rejected)
	live, err := openResources(ctx, e.js, topology.Config{}, LiveNames(), nil)
	require.NoError(t, err)
	_, err = live.state.Put(ctx, names.CheckpointKey, mustJSON(checkpoint{Switch: sw, Rules: RulesVersion}))
	require.NoError(t, err)

	e.start(Config{InstanceID: "live", BatchSize: 4})
	e.waitCheckpoint(e.lastSeq())
	e.requireLedger(buildModel(wireStored(ws)))
}

// Which streams belong to a scratch set, and to which: a rebuild deletes
// whole sets, never a stream of the live ledger or of a verify.
func TestScratchSetOf(t *testing.T) {
	id := "01JH8Y5W9Q2V3X4Z5A6B7C8D9E"
	tests := []struct {
		stream string
		id     string
		ok     bool
	}{
		{"KV_ledger_rebuild_" + id + "_requests", id, true},
		{"KV_ledger_rebuild_" + id + "_sessions", id, true},
		{"KV_ledger_rebuild_" + id + "_state", id, true},
		{"LEDGER_REBUILD_" + id + "_REJECTED", id, true},
		{"KV_ledger_rebuild_requests", "", true}, // the one set of earlier builds
		{"LEDGER_REBUILD_REJECTED", "", true},
		{"KV_ledger_rebuild_" + id + "_other", "", false},
		{"KV_ledger_requests", "", false},
		{"KV_ledger_state", "", false},
		{"LEDGER_REJECTED", "", false},
		{"LEDGER_ATTEMPTS", "", false},
		{"KV_ledger_verify_" + id + "_requests", "", false},
	}
	for _, tc := range tests {
		got, ok := scratchSetOf(tc.stream)
		require.Equal(t, tc.ok, ok, tc.stream)
		if ok {
			require.Equal(t, tc.id, got, tc.stream)
		}
	}
	for _, s := range ScratchNames(id).scratchStreams() {
		got, ok := scratchSetOf(s)
		require.True(t, ok, s)
		require.Equal(t, id, got, s)
	}
}
