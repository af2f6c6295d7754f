package replay

import (
	"context"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/ledgertest"
	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/projection"
	"github.com/agentledger/ledger/internal/topology"
)

// BenchmarkMemoryApply measures the in-memory projection that verify and
// the point-in-time report run: events per second (decode included) and
// the heap kept per request.
//
//	go test -run '^$' -bench MemoryApply -benchtime 1x ./internal/replay/
func BenchmarkMemoryApply(b *testing.B) {
	w := ledgertest.Generate(rand.New(rand.NewPCG(1, 1)), ledgertest.Spec{Sessions: 10_000, Calls: 200_000})
	type msg struct {
		subject string
		data    []byte
	}
	msgs := make([]msg, len(w.Messages))
	for i, m := range w.Messages {
		data, err := events.Marshal(m.Event)
		if err != nil {
			b.Fatal(err)
		}
		msgs[i] = msg{events.Subject(m.Event.SessionID, m.Event.RequestID), data}
	}
	b.ResetTimer()
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		mem := NewMemory(nil)
		for i, m := range msgs {
			mem.Apply(uint64(i+1), m.subject, m.data)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(len(w.Requests)), "heap-B/request")
		runtime.KeepAlive(mem)
	}
	b.ReportMetric(float64(len(msgs)*b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkVerify measures aggregator verify on a stream of about 200,000
// events (150,000 calls in 10,000 sessions) projected by the live
// aggregator: events per second of the whole verification (reading the
// live records, replaying the stream, comparing).
//
//	go test -run '^$' -bench Verify -benchtime 1x ./internal/replay/
func BenchmarkVerify(b *testing.B) {
	_, _, js := natstest.StartJS(b)
	ctx := context.Background()
	_, err := topology.EnsureAttempts(ctx, js, topology.Config{})
	if err != nil {
		b.Fatal(err)
	}
	w := ledgertest.Generate(rand.New(rand.NewPCG(2, 2)), ledgertest.Spec{Sessions: 10_000, Calls: 150_000})
	for _, m := range w.Messages {
		data, err := events.Marshal(m.Event)
		if err != nil {
			b.Fatal(err)
		}
		msg := nats.NewMsg(events.Subject(m.Event.SessionID, m.Event.RequestID))
		msg.Data = data
		if _, err := js.PublishMsgAsync(msg); err != nil {
			b.Fatal(err)
		}
	}
	<-js.PublishAsyncComplete()
	agg, err := projection.New(projection.Config{JS: js})
	if err != nil {
		b.Fatal(err)
	}
	actx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- agg.Run(actx) }()
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Minute)
	_, last, err := projection.WaitCaughtUp(wctx, js, 50*time.Millisecond)
	wcancel()
	cancel()
	if err != nil {
		b.Fatal(err)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		d, err := Verify(ctx, js, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if !d.Identical() {
			b.Fatalf("drift: %+v", d.Diffs[:min(5, len(d.Diffs))])
		}
	}
	b.ReportMetric(float64(last)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
