package monitor

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/ledgertest"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/projection"
)

// BenchmarkCatchUpObserved measures what the usage series cost the
// aggregator: it catches up on a stream of 100,000 events (the stream of
// projection's BenchmarkCatchUp: ~1.25 attempts per request, 20 % of
// requests with a billed failed attempt, two models, labels team (20
// values) and user (300 values, past the cap of 100)) with no observer,
// with the metrics, and with the metrics labelled by team and user.
// Reported as events/s and as bytes and allocations per event over the
// whole run (the aggregator's and the embedded server's own included:
// compare the variants). The lease lasts 10 s, so that a loaded machine
// does not end a term mid-run (a new term re-reads every record).
//
//	go test -run '^$' -bench CatchUpObserved -benchtime 1x -count 3 ./internal/monitor/
func BenchmarkCatchUpObserved(b *testing.B) {
	for _, v := range []struct {
		name string
		obs  func() projection.Observer
	}{
		{"observer=none", func() projection.Observer { return nil }},
		{"observer=metrics", func() projection.Observer { return benchMetrics(b, UsageOptions{}) }},
		{"observer=metrics+labels", func() projection.Observer {
			return benchMetrics(b, UsageOptions{Labels: []string{"team", "user"}})
		}},
	} {
		b.Run(v.name, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				js := ledgertest.StartStream(b)
				n := fillBenchStream(b, js, 100_000)
				info, err := js.Stream(context.Background(), names.AttemptsStream)
				require.NoError(b, err)
				last := info.CachedInfo().State.LastSeq
				obs := v.obs()
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				b.StartTimer()
				start := time.Now()
				agg, err := projection.New(projection.Config{JS: js, LeaseTTL: 10 * time.Second, Observer: obs})
				require.NoError(b, err)
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- agg.Run(ctx) }()
				for agg.Applied() < last {
					time.Sleep(time.Millisecond)
				}
				elapsed := time.Since(start)
				b.StopTimer()
				runtime.ReadMemStats(&after)
				cancel()
				require.NoError(b, <-done)
				b.ReportMetric(float64(n)/elapsed.Seconds(), "events/s")
				b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(n), "B/event")
				b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(n), "allocs/event")
			}
		})
	}
}

func benchMetrics(b *testing.B, o UsageOptions) *Metrics {
	m, err := NewMetrics(&fakeSource{}, o)
	require.NoError(b, err)
	return m
}

// fillBenchStream publishes about n events and returns how many.
func fillBenchStream(b *testing.B, js interface {
	PublishMsgAsync(*nats.Msg, ...jetstream.PublishOpt) (jetstream.PubAckFuture, error)
	PublishAsyncComplete() <-chan struct{}
}, n int) int {
	rng := rand.New(rand.NewPCG(1, 2))
	models := []string{"claude-opus-4-5-20251101", "claude-test"}
	sent, req := 0, 0
	publish := func(a *events.Attempt) {
		data, err := events.Marshal(a)
		require.NoError(b, err)
		m := nats.NewMsg(events.Subject(a.SessionID, a.RequestID))
		m.Data = data
		m.Header.Set(nats.MsgIdHdr, a.EventID)
		for {
			_, err = js.PublishMsgAsync(m)
			if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
				break
			}
			<-js.PublishAsyncComplete() // a loaded machine: let the server catch up
		}
		require.NoError(b, err)
		sent++
	}
	for sent < n {
		req++
		e := ev{n: sent + 1, request: fmt.Sprintf("r%d", req), model: models[req%2], in: 500, out: 1200}
		labels := api.Labels{"team": fmt.Sprintf("team-%d", rng.IntN(20)), "user": fmt.Sprintf("user-%d", rng.IntN(300))}
		session := fmt.Sprintf("s%d", rng.IntN(1000))
		if rng.IntN(5) == 0 {
			f := e
			f.kind, f.in, f.out = events.KindTimeout, 500, 0
			a := f.event()
			a.SessionID, a.Labels = session, labels
			publish(a)
			e.n, e.attempt = sent+1, 1
		}
		a := e.event()
		a.SessionID, a.Labels = session, labels
		publish(a)
	}
	<-js.PublishAsyncComplete()
	return sent
}
