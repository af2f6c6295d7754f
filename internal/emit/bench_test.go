package emit

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/topology"
)

// BenchmarkPublish measures events per second into LEDGER_ATTEMPTS on an
// embedded server with file storage: b.N events published from many
// goroutines, timed until the last one is acked.
func BenchmarkPublish(b *testing.B) { benchPublish(b) }

// BenchmarkPublishOutbox is BenchmarkPublish with every event written and
// fsynced to an outbox (WithOutbox) before Publish returns: the cost of
// surviving a crash.
func BenchmarkPublishOutbox(b *testing.B) { benchPublish(b, WithOutbox(b.TempDir())) }

func benchPublish(b *testing.B, opts ...Option) {
	_, _, js := natstest.StartJS(b)
	ctx := context.Background()
	stream, err := topology.EnsureAttempts(ctx, js, topology.Config{})
	if err != nil {
		b.Fatal(err)
	}
	p, err := New(js, opts...)
	if err != nil {
		b.Fatal(err)
	}
	template := sampleEvent("bench-session", "bench-request", "")
	var next atomic.Uint64

	b.ReportAllocs()
	b.SetParallelism(8) // 8 goroutines per core, like a fleet of agents
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		ev := template
		buf := make([]byte, 0, 32)
		for pb.Next() {
			n := next.Add(1)
			buf = strconv.AppendUint(append(buf[:0], "evt-"...), n, 36)
			ev.EventID = string(buf)
			ev.RequestID = ev.EventID // one subject per call, as in production
			if err := p.Publish(ctx, &ev); err != nil {
				b.Error(err)
				return
			}
		}
	})
	if err := p.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")

	st, err := p.Close(ctx)
	if err != nil {
		b.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if st.Acked != uint64(b.N) || info.State.Msgs != uint64(b.N) {
		b.Fatalf("acked %d, stream holds %d, want %d", st.Acked, info.State.Msgs, b.N)
	}
}

// sampleEvent is a valid successful attempt event.
func sampleEvent(session, request, id string) events.Attempt {
	start := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	return events.Attempt{
		Schema:            events.SchemaV1,
		EventID:           id,
		RequestID:         request,
		SessionID:         session,
		Attempt:           1,
		Outcome:           events.OutcomeSuccess,
		Final:             true,
		Provider:          "anthropic",
		Model:             "claude-sonnet-4-5",
		Usage:             events.Usage{InputTokens: 1200, OutputTokens: 350, CacheReadInputTokens: 800},
		StartedAt:         start,
		FinishedAt:        start.Add(1500 * time.Millisecond),
		ProviderRequestID: "req_011CUAbcdEFGhijkLMNopQRs",
	}
}

// BenchmarkPublishAsyncBaseline is the ceiling BenchmarkPublish is measured
// against: the same events (marshalled beforehand) published by a bare
// js.PublishMsgAsync loop from one goroutine, without the Publisher.
func BenchmarkPublishAsyncBaseline(b *testing.B) {
	_, nc, js := natstest.StartJS(b)
	ctx := context.Background()
	if _, err := topology.EnsureAttempts(ctx, js, topology.Config{}); err != nil {
		b.Fatal(err)
	}
	pub, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(DefaultMaxInFlight))
	if err != nil {
		b.Fatal(err)
	}
	ev := sampleEvent("bench-session", "bench-request", "")
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		ev.EventID = "evt-" + strconv.FormatUint(uint64(i), 36)
		ev.RequestID = ev.EventID
		data, err := events.Marshal(&ev)
		if err != nil {
			b.Fatal(err)
		}
		msg := &nats.Msg{
			Subject: events.Subject(ev.SessionID, ev.RequestID),
			Data:    data,
			Header:  nats.Header{jetstream.MsgIDHeader: []string{ev.EventID}},
		}
		if _, err := pub.PublishMsgAsync(msg, jetstream.WithRetryAttempts(0)); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-pub.PublishAsyncComplete():
	case <-time.After(time.Minute):
		b.Fatal("acks did not arrive")
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
}
