package replay

import (
	"context"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentledger/ledger/internal/bench"
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

// BenchmarkVerify measures aggregator verify of a ledger the live
// aggregator projected: events per second of the whole verification, and
// the aggregator's catch-up rate into empty buckets on the same stream,
// and the cores the process (verify and the embedded server) kept busy
// while verifying. Verify's own memory is measured by make bench, which
// runs the command in a process of its own.
// The stream is workload a of cmd/bench (1.3 attempts per request, 10,000
// sessions) at VERIFY_BENCH_EVENTS events (default 200,000; make bench
// runs 1,000,000).
//
//	go test -run '^$' -bench 'Verify$' -benchtime 1x ./internal/replay/
//	VERIFY_BENCH_EVENTS=1000000 go test -run '^$' -bench 'Verify$' -benchtime 1x -timeout 30m ./internal/replay/
func BenchmarkVerify(b *testing.B) {
	n := 200_000
	if v := os.Getenv("VERIFY_BENCH_EVENTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("VERIFY_BENCH_EVENTS %q must be a positive integer", v)
		}
	}
	_, _, js := natstest.StartJS(b)
	ctx := context.Background()
	_, err := topology.EnsureAttempts(ctx, js, topology.Config{})
	if err != nil {
		b.Fatal(err)
	}
	spec := bench.Spec{Name: "a", Events: n, Sessions: max(1, n/100)}
	err = bench.Generate(spec, 1, func(ev *events.Attempt) error {
		data, err := events.Marshal(ev)
		if err != nil {
			return err
		}
		msg := nats.NewMsg(events.Subject(ev.SessionID, ev.RequestID))
		msg.Data = data
		_, err = js.PublishMsgAsync(msg)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	<-js.PublishAsyncComplete()
	agg, err := projection.New(projection.Config{JS: js})
	if err != nil {
		b.Fatal(err)
	}
	actx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- agg.Run(actx) }()
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Minute)
	_, last, err := projection.WaitCaughtUp(wctx, js, 5*time.Millisecond)
	catchUp := time.Since(start)
	wcancel()
	cancel()
	if err != nil {
		b.Fatal(err)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	b.ResetTimer()
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	for b.Loop() {
		d, err := Verify(ctx, js, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if !d.Identical() {
			b.Fatalf("drift: %+v", d.Diffs[:min(5, len(d.Diffs))])
		}
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	b.ReportMetric(float64(last)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(last)/catchUp.Seconds(), "aggregator-events/s")
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	b.ReportMetric(cpu.Seconds()/b.Elapsed().Seconds(), "cores")
}
