package projection

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/topology"
)

// storedWires reads back every message of LEDGER_ATTEMPTS in stream
// order: what the model must see when publishers may have stored a
// message twice (a publish retried without Nats-Msg-Id).
func (e *env) storedWires() []wire {
	e.t.Helper()
	ctx := context.Background()
	s, err := e.js.Stream(ctx, names.AttemptsStream)
	require.NoError(e.t, err)
	info, err := s.Info(ctx)
	require.NoError(e.t, err)
	var out []wire
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		require.NoError(e.t, err)
		out = append(out, wire{subject: m.Subject, data: m.Data})
	}
	return out
}

// publishUntilAcked publishes ws one after the other, each retried until
// it is acknowledged (a leader change makes publishes fail for a while).
func publishUntilAcked(ctx context.Context, js jetstream.JetStream, ws []wire) error {
	for _, w := range ws {
		m := nats.NewMsg(w.subject)
		m.Data = w.data
		if w.msgID != "" {
			m.Header.Set(nats.MsgIdHdr, w.msgID)
		}
		for {
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			_, err := js.PublishMsg(pctx, m)
			cancel()
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	return nil
}

// stallWatch samples the checkpoint and the stream's end and keeps the
// longest time the ledger did not move while events were waiting.
type stallWatch struct {
	mu      sync.Mutex
	longest time.Duration
	stop    context.CancelFunc
	done    chan struct{}
}

func (e *env) watchStalls() *stallWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &stallWatch{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		var cp uint64
		waiting := false
		since := time.Now() // when the ledger last moved, or work arrived
		t := time.NewTicker(25 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			now, err := ReadCheckpoint(ctx, e.js)
			if err != nil {
				continue // the state bucket's leader may be changing too
			}
			s, err := e.js.Stream(ctx, names.AttemptsStream)
			if err != nil {
				continue
			}
			info, err := s.Info(ctx)
			if err != nil {
				continue
			}
			// A sample can fail while leaders change, so the stall is
			// measured between two samples that succeed: from the last
			// move of the ledger (with events waiting) to the next one.
			if waiting {
				w.mu.Lock()
				w.longest = max(w.longest, time.Since(since))
				w.mu.Unlock()
			}
			if now != cp || !waiting {
				cp, since = now, time.Now()
			}
			waiting = info.State.LastSeq > now
		}
	}()
	return w
}

// finish stops the watch and returns the longest stall.
func (w *stallWatch) finish() time.Duration {
	w.stop()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.longest
}

// streamLeader returns the name of the server that leads the stream
// ("" when unknown).
func streamLeader(ctx context.Context, js jetstream.JetStream, name string) string {
	s, err := js.Stream(ctx, name)
	if err != nil {
		return ""
	}
	info, err := s.Info(ctx)
	if err != nil || info.Cluster == nil {
		return ""
	}
	return info.Cluster.Leader
}

// Failover within seconds: on a 3-node cluster with every stream and
// bucket replicated three times, the leader of LEDGER_ATTEMPTS or of
// KV_ledger_requests is killed while events are published and projected.
// The aggregator notices and resumes within seconds (not after a fixed
// 30 s wait), and the ledger stays exact.
func TestFailoverWithinSeconds(t *testing.T) {
	if testing.Short() {
		t.Skip("a 3-node cluster")
	}
	for _, tc := range []struct {
		victim string
		at     FaultPoint // where the aggregator is when the leader dies
	}{
		{names.AttemptsStream, FaultAfterRead},
		{"KV_" + names.RequestsBucket, FaultBeforeWrites},
	} {
		victim := tc.victim
		t.Run(victim, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			c := natstest.StartCluster(t, 3)
			nc, js := c.Connect(t)
			e := &env{t: t, nc: nc, js: js}
			topo := topology.Config{Replicas: 3}
			_, err := topology.EnsureAttempts(ctx, js, topo)
			require.NoError(t, err)
			rng := rand.New(rand.NewPCG(61, uint64(len(victim))))
			ws := genWorkload(t, rng, 8, 1500)
			// A backlog, so that the aggregator is reading and writing
			// when the leader dies, and more events while it catches up.
			backlog := len(ws) / 2
			require.NoError(t, publishUntilAcked(ctx, js, ws[:backlog]))
			ws = ws[backlog:]
			// The leader dies when the aggregator has just read a batch
			// (its consumer must recover) or is about to write one (its
			// writes go to a dead leader), a few batches in.
			var killed sync.Once
			var leader string
			var watch *stallWatch
			seen := 0
			fault := func(p FaultPoint) error {
				if p != tc.at {
					return nil
				}
				if seen++; seen == 5 {
					killed.Do(func() {
						leader = streamLeader(ctx, js, victim)
						watch = e.watchStalls()
						c.Kill(leader)
					})
				}
				return nil
			}
			agg := e.start(Config{InstanceID: "a", Topology: topo, BatchSize: 20, LeaseTTL: 10 * time.Second, Faults: fault})
			var wg sync.WaitGroup
			wg.Add(1)
			var pubErr error
			go func() {
				defer wg.Done()
				pubErr = publishUntilAcked(ctx, js, ws)
			}()
			wg.Wait()
			require.NoError(t, pubErr)
			e.waitCheckpoint(e.lastSeq())
			require.NotNil(t, watch, "the leader was never killed")
			require.NotEmpty(t, leader, "the leader was not known")
			stall := watch.finish()
			t.Logf("killed %s, the leader of %s, at %s: the longest stall of the ledger was %s", leader, victim, tc.at, stall.Round(time.Millisecond))
			require.Less(t, stall, 15*time.Second, "failover took too long")
			require.True(t, agg.agg.Leading())
			e.requireLedger(buildModel(e.storedWires()))
		})
	}
}
