package replay

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/ledgertest"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/projection"
	"github.com/agentledger/ledger/internal/topology"
)

// forceSlowConsumer makes nc report a slow consumer: a subscription with
// a pending limit of one message whose handler is stuck gets five. It
// returns once the client has dropped them (the flush's answer comes
// after them).
func forceSlowConsumer(t *testing.T, nc *nats.Conn) {
	t.Helper()
	stuck := make(chan struct{})
	sub, err := nc.Subscribe("verify.test.flood", func(*nats.Msg) { <-stuck })
	require.NoError(t, err)
	require.NoError(t, sub.SetPendingLimits(1, -1))
	t.Cleanup(func() {
		close(stuck)
		_ = sub.Unsubscribe()
	})
	for range 5 {
		require.NoError(t, nc.Publish("verify.test.flood", nil))
	}
	require.NoError(t, nc.Flush())
	dropped, err := sub.Dropped()
	require.NoError(t, err)
	require.Positive(t, dropped)
}

// Issue 15, case 9: verify said "identical" although the client logged
// "slow consumer, messages dropped" while it read. Once the client reports
// a slow consumer during a verify, verify fails with ErrSlowConsumer
// (exit 2, could not compare), whatever it compared.
func TestVerifySlowConsumerCannotCompare(t *testing.T) {
	js := startJS(t)
	w := ledgertest.Generate(rand.New(rand.NewPCG(15, 9)), ledgertest.Spec{Sessions: 4, Calls: 60})
	ledgertest.Publish(t, js, w.Messages)
	project(t, js, nil)
	require.True(t, verify(t, js, Options{}).Identical(), "the ledger is right to begin with")

	var once sync.Once
	d, err := Verify(context.Background(), js, Options{Progress: func(done, total uint64) {
		once.Do(func() { forceSlowConsumer(t, js.Conn()) })
	}})
	require.ErrorIs(t, err, ErrSlowConsumer, "a verify during which messages were dropped said %+v", d)
	require.Contains(t, err.Error(), "could not compare")
}

// Verify's own reads (batched direct gets) never drop an answer for want
// of room; when a subscription does drop one (a seam forces a pending
// limit of one message), verify stops at once with ErrSlowConsumer rather
// than wait for the answer or skip it.
func TestVerifyDirectGetDropIsAnError(t *testing.T) {
	js := startJS(t)
	w := ledgertest.Generate(rand.New(rand.NewPCG(15, 10)), ledgertest.Spec{Sessions: 6, Calls: 400})
	ledgertest.Publish(t, js, w.Messages)
	project(t, js, nil)
	require.True(t, verify(t, js, Options{}).Identical())

	orig := subscribeDirect
	t.Cleanup(func() { subscribeDirect = orig })
	// Each subscription of a direct get gets a pending limit of one
	// message and two messages before the first answer: the client drops
	// the second, as it would an answer that found no room.
	subscribeDirect = func(nc *nats.Conn, subject string) (*nats.Subscription, error) {
		sub, err := nc.SubscribeSync(subject)
		if err != nil {
			return nil, err
		}
		if err := sub.SetPendingLimits(1, -1); err != nil {
			return nil, err
		}
		flood := strings.Replace(subject, "*", "flood", 1)
		for range 2 {
			if err := nc.Publish(flood, nil); err != nil {
				return nil, err
			}
		}
		return sub, nc.Flush()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := Verify(ctx, js, Options{})
	require.ErrorIs(t, err, ErrSlowConsumer)
}

// After `aggregator rebuild --accept-loss` the ledger holds what the
// stream still holds, and the loss record covers the rest: verify
// compares from the stream's first sequence and finds the ledger
// identical. Without the record it refuses (ErrIncomplete).
func TestVerifyAfterAcceptedLoss(t *testing.T) {
	ctx := context.Background()
	_, _, js := natstest.StartJS(t)
	cfg, err := topology.AttemptsStreamConfig(topology.Config{})
	require.NoError(t, err)
	cfg.MaxMsgs = 60
	_, err = js.CreateStream(ctx, cfg)
	require.NoError(t, err)
	w := ledgertest.Generate(rand.New(rand.NewPCG(15, 11)), ledgertest.Spec{Sessions: 3, Calls: 60})
	ledgertest.Publish(t, js, w.Messages)
	s, err := js.Stream(ctx, names.AttemptsStream)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	require.Greater(t, info.State.FirstSeq, uint64(1), "the workload must overflow the stream")

	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, projection.Rebuild(rctx, projection.RebuildConfig{JS: js, LeaseTTL: time.Second, AcceptLoss: true}))
	d := verify(t, js, Options{})
	require.True(t, d.Identical(), "%+v", d)
	require.Positive(t, d.RequestsChecked)

	state, err := js.KeyValue(ctx, names.StateBucket)
	require.NoError(t, err)
	require.NoError(t, state.Delete(ctx, names.LossKey))
	_, err = Verify(ctx, js, Options{})
	require.ErrorIs(t, err, ErrIncomplete)
}
