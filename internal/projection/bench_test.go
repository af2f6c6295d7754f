package projection

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/pricing"
	"github.com/agentledger/ledger/internal/topology"
)

// BenchmarkCatchUp measures the aggregator applying a stream of events
// into empty buckets: ~1.3 attempts per request, 20 % of requests with a
// billed failed attempt, over about 28 hours. Reported as events/s, for
// two label sets: a team label of ten (some 560 hour cells), and also a
// user label, one per session (some 28,000: nearly every request of a
// batch in its own cell). Each is run with every rollup grain, with the
// hour cells only (a ledger that had no rollups for its first event:
// the coarser grains are not written on it) and without rollups
// (Names.Rollups empty): the comparisons of issue 20.
//
//	go test -run '^$' -bench CatchUp -benchtime 1x ./internal/projection/
func BenchmarkCatchUp(b *testing.B) {
	withRollups := LiveNames()
	without := withRollups
	without.Rollups = ""
	for _, labels := range []string{"team", "team,user"} {
		for _, mode := range []struct {
			rollups string
			names   Names
		}{{"all-grains", withRollups}, {"hour-only", withRollups}, {"none", without}} {
			b.Run(fmt.Sprintf("events=100000/labels=%s/rollups=%s", labels, mode.rollups), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					e := newEnv(b)
					ctx := context.Background()
					if mode.rollups == "hour-only" {
						// The ledger's first event is projected without
						// rollups: it will have hour cells only.
						e.publish(evSpec{n: 0, session: "first", request: "first", success: true, in: 1}.wire(b))
						r := e.start(Config{InstanceID: "first", Names: without})
						e.waitCheckpoint(1)
						require.NoError(b, r.stop(b))
					}
					n := fillStream(b, e, 100_000, 1_000, labels == "team,user")
					last := e.lastSeq()
					b.StartTimer()
					start := time.Now()
					agg, err := New(Config{JS: e.js, LeaseTTL: benchLeaseTTL, BatchSize: benchBatch(), Names: mode.names})
					require.NoError(b, err)
					runCtx, cancel := context.WithCancel(ctx)
					done := make(chan error, 1)
					go func() { done <- agg.Run(runCtx) }()
					for agg.Applied() < last {
						time.Sleep(time.Millisecond)
					}
					elapsed := time.Since(start)
					b.StopTimer()
					cancel()
					require.NoError(b, <-done)
					b.ReportMetric(float64(n)/elapsed.Seconds(), "events/s")
				}
			})
		}
	}
}

// fillStream publishes about events events: ~1.25 attempts per request,
// 20 % of requests with a billed failed attempt, each labelled with its
// session's team (of ten) and, with users, its session as the user.
func fillStream(b *testing.B, e *env, events, sessions int, users bool) int {
	rng := rand.New(rand.NewPCG(1, 2))
	n, req := 0, 0
	for n < events {
		req++
		s := rng.IntN(sessions)
		session := fmt.Sprintf("s%d", s)
		request := fmt.Sprintf("r%d", req)
		labels := api.Labels{"team": fmt.Sprintf("team-%d", s%10)}
		if users {
			labels["user"] = session
		}
		attempt := 0
		if rng.IntN(5) == 0 {
			publishAsync(b, e, evSpec{n: n, session: session, request: request, attempt: 0, in: 500, labels: labels}.wire(b))
			n++
			attempt = 1
		}
		publishAsync(b, e, evSpec{n: n, session: session, request: request, attempt: attempt, success: true, in: 500, out: 1200, labels: labels}.wire(b))
		n++
	}
	<-e.js.PublishAsyncComplete()
	return n
}

// BenchmarkRebuild measures a rebuild of a ledger already live over the
// whole stream: the projection phase into scratch buckets (events/s) and
// the whole rebuild including the switch.
//
//	go test -run '^$' -bench Rebuild -benchtime 1x ./internal/projection/
func BenchmarkRebuild(b *testing.B) {
	const events, sessions = 200_000, 10_000
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		e := newEnv(b)
		n := fillStream(b, e, events, sessions, false)
		live := e.start(Config{InstanceID: "live", LeaseTTL: benchLeaseTTL})
		e.waitCheckpoint(e.lastSeq())
		b.StartTimer()
		start := time.Now()
		var projected time.Duration
		err := Rebuild(context.Background(), RebuildConfig{JS: e.js, LeaseTTL: benchLeaseTTL, Progress: func(p string, applied, last uint64) {
			if p == "project" && last > 0 && applied >= last && projected == 0 {
				projected = time.Since(start)
			}
		}})
		total := time.Since(start)
		b.StopTimer()
		require.NoError(b, err)
		require.NoError(b, live.stop(b))
		b.ReportMetric(float64(n)/projected.Seconds(), "projected-events/s")
		b.ReportMetric(total.Seconds(), "rebuild-s")
	}
}

func publishAsync(b *testing.B, e *env, w wire) {
	m := nats.NewMsg(w.subject)
	m.Data = w.data
	m.Header.Set(nats.MsgIdHdr, w.msgID)
	for {
		_, err := e.js.PublishMsgAsync(m)
		if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			require.NoError(b, err)
			return
		}
		// A loaded server acks late: wait for the acks, then go on.
		<-e.js.PublishAsyncComplete()
	}
}

func benchBatch() int {
	var n int
	if _, err := fmt.Sscan(os.Getenv("BENCH_BATCH"), &n); err == nil {
		return n
	}
	return 0
}

// BenchmarkRawConsume is the yardstick of BenchmarkCatchUp: the same
// stream read by an ordered consumer that decodes every event and writes
// nothing.
func BenchmarkRawConsume(b *testing.B) {
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		e := newEnv(b)
		n := fillStream(b, e, 100_000, 1_000, false)
		b.StartTimer()
		start := time.Now()
		s, err := e.js.Stream(context.Background(), names.AttemptsStream)
		require.NoError(b, err)
		cons, err := s.OrderedConsumer(context.Background(), jetstream.OrderedConsumerConfig{})
		require.NoError(b, err)
		got := 0
		done := make(chan struct{})
		cc, err := cons.Consume(func(m jetstream.Msg) {
			if _, err := events.Decode(m.Data()); err != nil {
				b.Error(err)
			}
			got++
			if got == n {
				close(done)
			}
		}, jetstream.PullMaxMessages(20_000))
		require.NoError(b, err)
		<-done
		elapsed := time.Since(start)
		cc.Stop()
		b.ReportMetric(float64(n)/elapsed.Seconds(), "events/s")
	}
}

// BenchmarkPriceAttempt is the cost pricing adds to each event the
// aggregator applies: one catalog lookup (a dated model ID resolved to its
// family) and the exact arithmetic, set against the aggregator's time per
// event in make bench (its catch-up rate with and without prices).
//
//	go test -run '^$' -bench PriceAttempt -benchmem ./internal/projection/
func BenchmarkPriceAttempt(b *testing.B) {
	cat := pricing.Default()
	ev := evSpec{n: 1, session: "s", request: "r", success: true, in: 1200, out: 300, cacheRead: 64}.event()
	ev.Model = "claude-opus-4-5-20251101"
	if _, ok := PriceAttempt(cat, ev); !ok {
		b.Fatal("the benchmark's model has no price")
	}
	for b.Loop() {
		PriceAttempt(cat, ev)
	}
}

// BenchmarkReadRollups reads every cell of a ledger_rollups of 50,000
// cells (a ledger of 1M requests over a month of hours, models and teams
// has tens of thousands), as the report does. Reported as cells/s and
// the time of one read.
//
//	go test -run '^$' -bench ReadRollups -benchtime 3x ./internal/projection/
func BenchmarkReadRollups(b *testing.B) {
	const cells = 50_000
	e := newEnv(b)
	ctx := context.Background()
	res, err := openResources(ctx, e.js, topology.Config{}, LiveNames(), nil)
	require.NoError(b, err)
	var puts []put
	for i := range cells {
		c := &Rollup{Cell: Cell{Hour: t0.Add(time.Duration(i%720) * time.Hour), Provider: "openai", Model: fmt.Sprintf("gpt-%d", i/720%10),
			Labels: api.Labels{"team": fmt.Sprintf("team-%d", i/7200), "user": fmt.Sprintf("u-%d", i)}},
			Totals: Totals{Requests: 20, Succeeded: 20, Attempts: 26, Usage: events.Usage{InputTokens: 10_000, OutputTokens: 24_000}}, Seq: 1, Rules: RulesVersion}
		puts = append(puts, put{key: c.Key(), value: c.appendJSON(nil)})
		if len(puts) == 5000 || i == cells-1 {
			require.NoError(b, res.rollups.putAll(ctx, puts, nil))
			puts = puts[:0]
		}
	}
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		all, err := ReadRollups(ctx, e.js, LiveNames(), RollupFilter{})
		require.NoError(b, err)
		require.Len(b, all, cells)
		b.ReportMetric(float64(cells)/time.Since(start).Seconds(), "cells/s")
	}
}

// benchLeaseTTL is the benchmarks' lease: the production default. A
// renewal waits behind the batch writes on the same connection, so a 1 s
// lease lapsed on a loaded machine, ended terms mid-run and made the
// figures bimodal (and cmd/bench's children use the production TTL too).
const benchLeaseTTL = 10 * time.Second
