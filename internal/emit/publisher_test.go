package emit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/embedded"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/retry"
	"github.com/agentledger/ledger/internal/testkit"
	"github.com/agentledger/ledger/internal/topology"
)

const waitFor = 15 * time.Second // upper bound of every condition wait

// testContext is a context that ends with the test or after waitFor.
func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	t.Cleanup(cancel)
	return ctx
}

// newPublisher starts a Publisher with fast retries and closes it at
// cleanup (if the test did not).
func newPublisher(t *testing.T, js jetstream.JetStream, opts ...Option) *Publisher {
	t.Helper()
	opts = append([]Option{WithBackoff(time.Millisecond, 20*time.Millisecond)}, opts...)
	p, err := New(js, opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, _ = p.Close(ctx)
	})
	return p
}

func ensureStream(t *testing.T, js jetstream.JetStream) jetstream.Stream {
	t.Helper()
	s, err := topology.EnsureAttempts(testContext(t), js, topology.Config{})
	require.NoError(t, err)
	return s
}

// stored is what the stream holds for one event ID.
type stored struct {
	subject string
	copies  int
	eventID string // from the body
}

// readStream returns the stream's messages keyed by Nats-Msg-Id.
func readStream(t *testing.T, js jetstream.JetStream) map[string]*stored {
	t.Helper()
	ctx := testContext(t)
	s, err := js.Stream(ctx, names.AttemptsStream)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	total := int(info.State.Msgs)
	out := make(map[string]*stored, total)
	if total == 0 {
		return out
	}
	cons, err := js.OrderedConsumer(ctx, names.AttemptsStream, jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	for got := 0; got < total; {
		batch, err := cons.Fetch(total-got, jetstream.FetchMaxWait(5*time.Second))
		require.NoError(t, err)
		for msg := range batch.Messages() {
			got++
			id := msg.Headers().Get(jetstream.MsgIDHeader)
			var body struct {
				EventID string `json:"event_id"`
			}
			require.NoError(t, json.Unmarshal(msg.Data(), &body))
			if out[id] == nil {
				out[id] = &stored{subject: msg.Subject(), eventID: body.EventID}
			}
			out[id].copies++
		}
		require.NoError(t, batch.Error())
	}
	return out
}

// streamMsgs is the number of messages in the attempt stream.
func streamMsgs(t *testing.T, js jetstream.JetStream) uint64 {
	t.Helper()
	ctx := testContext(t)
	s, err := js.Stream(ctx, names.AttemptsStream)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	return info.State.Msgs
}

// requireLanded checks that every event landed exactly once, on its
// subject, with its ID as Nats-Msg-Id and in its body, and nothing else.
func requireLanded(t *testing.T, js jetstream.JetStream, evs []events.Attempt) {
	t.Helper()
	got := readStream(t, js)
	require.Len(t, got, len(evs))
	for _, ev := range evs {
		s := got[ev.EventID]
		require.NotNil(t, s, "event %s is missing", ev.EventID)
		assert.Equal(t, 1, s.copies, "event %s", ev.EventID)
		assert.Equal(t, events.Subject(ev.SessionID, ev.RequestID), s.subject)
		assert.Equal(t, ev.EventID, s.eventID)
	}
}

// makeEvents returns n valid events with distinct IDs spread over a few
// sessions.
func makeEvents(prefix string, n int) []events.Attempt {
	evs := make([]events.Attempt, n)
	for i := range evs {
		evs[i] = sampleEvent(fmt.Sprintf("sess-%d", i%7), fmt.Sprintf("%s-req-%d", prefix, i/2), fmt.Sprintf("%s-evt-%05d", prefix, i))
		evs[i].Attempt = i%2 + 1
	}
	return evs
}

func publishAll(t *testing.T, p *Publisher, evs []events.Attempt) {
	t.Helper()
	ctx := testContext(t)
	for i := range evs {
		require.NoError(t, p.Publish(ctx, &evs[i]))
	}
}

func TestPublishFromManyGoroutinesLandsExactlyOnce(t *testing.T) {
	_, _, js := natstest.StartJS(t)
	ensureStream(t, js)
	// A small window and buffer make the pipeline wrap around many times.
	p := newPublisher(t, js, WithMaxInFlight(64), WithBufferSize(32))

	const goroutines, each = 16, 150
	evs := makeEvents("many", goroutines*each)
	ctx := testContext(t)
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for i := g * each; i < (g+1)*each; i++ {
				if err := p.Publish(ctx, &evs[i]); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, p.Flush(ctx))

	requireLanded(t, js, evs)
	st, err := p.Close(ctx)
	require.NoError(t, err)
	n := uint64(len(evs))
	assert.Equal(t, Stats{Enqueued: n, Acked: n}, st)
}

func TestRepublishedEventIsStoredOnceAndCountedAsDuplicate(t *testing.T) {
	_, _, js := natstest.StartJS(t)
	ensureStream(t, js)
	p := newPublisher(t, js)
	ctx := testContext(t)

	ev := sampleEvent("sess-dup", "req-dup", "evt-dup-1")
	require.NoError(t, p.Publish(ctx, &ev))
	require.NoError(t, p.Flush(ctx))
	require.NoError(t, p.Publish(ctx, &ev))
	require.NoError(t, p.Flush(ctx))

	requireLanded(t, js, []events.Attempt{ev})
	assert.Equal(t, Stats{Enqueued: 2, Acked: 2, Duplicates: 1}, p.Stats())
}

func TestEventsBufferUntilTheStreamExists(t *testing.T) {
	tests := []struct {
		name   string
		ensure bool // the publisher creates the stream; else the test does
	}{
		{"created by the test", false},
		{"created by the publisher", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, js := natstest.StartJS(t)
			var noStream atomic.Int64
			opts := []Option{WithErrorHandler(func(err error) {
				if errors.Is(err, jetstream.ErrNoStreamResponse) {
					noStream.Add(1)
				}
			})}
			if tt.ensure {
				opts = append(opts, WithEnsureStream(topology.Config{}))
			}
			p := newPublisher(t, js, opts...)
			evs := makeEvents("late", 40)
			publishAll(t, p, evs)

			if !tt.ensure {
				// Wait until the publishes failed for want of a stream
				// and are being retried, then create it.
				require.Eventually(t, func() bool {
					return noStream.Load() > 0 && p.Stats().Retries > 0
				}, waitFor, 5*time.Millisecond)
				assert.Zero(t, p.Stats().Acked)
				ensureStream(t, js)
			}
			require.NoError(t, p.Flush(testContext(t)))
			requireLanded(t, js, evs)
			st, err := p.Close(testContext(t))
			require.NoError(t, err)
			assert.Equal(t, uint64(len(evs)), st.Acked)
			assert.Zero(t, st.Undelivered)
		})
	}
}

func TestPublishBlocksWhileTheBufferIsFull(t *testing.T) {
	_, _, js := natstest.StartJS(t)
	// No stream and no ensure: nothing is ever acked, so once the one
	// in-flight slot and the one buffer slot are taken, Publish blocks.
	p := newPublisher(t, js, WithBufferSize(1), WithMaxInFlight(1))
	evs := makeEvents("bp", 4)
	ctx := testContext(t)
	require.NoError(t, p.Publish(ctx, &evs[0]))
	require.NoError(t, p.Publish(ctx, &evs[1])) // returns once the loop took evs[0]

	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err := p.Publish(short, &evs[2])
	require.ErrorIs(t, err, context.DeadlineExceeded)

	canceled, cancelNow := context.WithCancel(ctx)
	cancelNow()
	require.ErrorIs(t, p.Publish(canceled, &evs[2]), context.Canceled)
	assert.Equal(t, uint64(2), p.Stats().Enqueued, "refused events are not counted")

	// A blocked Publish goes through once the stream exists and acks
	// free the slots.
	done := make(chan error, 1)
	go func() { done <- p.Publish(ctx, &evs[2]) }()
	ensureStream(t, js)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("Publish stayed blocked after the stream was created")
	}
	require.NoError(t, p.Flush(ctx))
	requireLanded(t, js, evs[:3])
}

func TestCloseUnblocksABlockedPublish(t *testing.T) {
	_, _, js := natstest.StartJS(t)
	p := newPublisher(t, js, WithBufferSize(1), WithMaxInFlight(1))
	evs := makeEvents("unblock", 3)
	ctx := testContext(t)
	require.NoError(t, p.Publish(ctx, &evs[0]))
	require.NoError(t, p.Publish(ctx, &evs[1]))

	// The middleware publishes with a context that is never canceled, so
	// Close must be what releases it.
	done := make(chan error, 1)
	go func() { done <- p.Publish(context.WithoutCancel(ctx), &evs[2]) }()

	closeCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	st, err := p.Close(closeCtx)
	require.ErrorIs(t, err, ErrUndelivered)
	select {
	case err := <-done:
		require.ErrorIs(t, err, ErrClosed)
	case <-ctx.Done():
		t.Fatal("Publish stayed blocked after Close")
	}
	assert.Equal(t, uint64(2), st.Enqueued)
	assert.Equal(t, uint64(2), st.Undelivered)
}

func TestCloseWithUnreachableServerReportsUndelivered(t *testing.T) {
	srv, _, js := natstest.StartJS(t)
	ensureStream(t, js)
	p := newPublisher(t, js)
	ctx := testContext(t)

	delivered := makeEvents("before", 10)
	publishAll(t, p, delivered)
	require.NoError(t, p.Flush(ctx))

	srv.Shutdown()
	lost := makeEvents("after", 7)
	publishAll(t, p, lost) // never waits on the network

	closeCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	st, closeErr := p.Close(closeCtx)
	require.ErrorIs(t, closeErr, ErrUndelivered)
	var ue *UndeliveredError
	require.ErrorAs(t, closeErr, &ue)
	assert.Equal(t, uint64(7), ue.Count)
	assert.Contains(t, closeErr.Error(), "7 event(s) undelivered")
	// Itself, not joined with a nil outbox error: ledger.Publisher.Close
	// returns it as it is, and its users may assert its type.
	_, bare := closeErr.(*UndeliveredError)
	assert.True(t, bare, "Close returned %T, not the *UndeliveredError", closeErr)
	assert.Equal(t, Stats{Enqueued: 17, Acked: 10, Undelivered: 7}, Stats{
		Enqueued: st.Enqueued, Acked: st.Acked, Undelivered: st.Undelivered,
	})

	// Closed for good, and Close is idempotent.
	ev := sampleEvent("s", "r", "evt-late")
	err := p.Publish(ctx, &ev)
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, err, retry.ErrSinkClosed)
	require.ErrorIs(t, p.Flush(ctx), ErrClosed)
	st2, err2 := p.Close(ctx)
	assert.Equal(t, st, st2)
	assert.Equal(t, closeErr, err2)
	assert.Equal(t, st, p.Stats())
}

func TestClosedConnectionKeepsEventsAndReportsThem(t *testing.T) {
	_, nc, js := natstest.StartJS(t)
	ensureStream(t, js)
	var failures atomic.Int64
	p := newPublisher(t, js, WithErrorHandler(func(err error) {
		if errors.Is(err, nats.ErrConnectionClosed) {
			failures.Add(1)
		}
	}))
	first := sampleEvent("sess", "req", "evt-first")
	require.NoError(t, p.Publish(testContext(t), &first))
	require.NoError(t, p.Flush(testContext(t)))

	nc.Close()
	evs := makeEvents("closed", 3)
	publishAll(t, p, evs)
	// PublishMsgAsync itself fails now; the events are held and retried.
	require.Eventually(t, func() bool { return failures.Load() >= 2 }, waitFor, time.Millisecond)

	closeCtx, cancel := context.WithTimeout(testContext(t), 100*time.Millisecond)
	defer cancel()
	st, err := p.Close(closeCtx)
	require.ErrorIs(t, err, ErrUndelivered)
	require.ErrorIs(t, err, nats.ErrConnectionClosed, "the last failure is reported")
	assert.Equal(t, Stats{Enqueued: 4, Acked: 1, Retries: st.Retries, Undelivered: 3}, st)
	assert.Positive(t, st.Retries)
}

func TestCloseDrainsBufferedEvents(t *testing.T) {
	_, nc, js := natstest.StartJS(t)
	ensureStream(t, js)
	subsBefore := nc.NumSubscriptions()
	p := newPublisher(t, js, WithMaxInFlight(16))
	evs := makeEvents("drain", 500)
	publishAll(t, p, evs)

	st, err := p.Close(testContext(t)) // no Flush: Close drains
	require.NoError(t, err)
	assert.Equal(t, Stats{Enqueued: 500, Acked: 500}, st)
	assert.Equal(t, subsBefore, nc.NumSubscriptions(), "Close releases the reply subscription")
	requireLanded(t, js, evs)

	ev := sampleEvent("s", "r", "evt-after-close")
	require.ErrorIs(t, p.Publish(testContext(t), &ev), ErrClosed)
}

func TestFlushWaitsForAcks(t *testing.T) {
	_, _, js := natstest.StartJS(t)
	p := newPublisher(t, js)
	ctx := testContext(t)
	require.NoError(t, p.Flush(ctx), "nothing to wait for")

	evs := makeEvents("flush", 5)
	publishAll(t, p, evs)

	// No stream yet: no ack can come, so Flush must give up with the count.
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	err := p.Flush(short)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	var pe *PendingError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, uint64(5), pe.Pending)
	assert.Zero(t, p.Stats().Acked)

	ensureStream(t, js)
	require.NoError(t, p.Flush(ctx))
	// Flush returned: every event is acked and stored.
	assert.Equal(t, uint64(5), p.Stats().Acked)
	assert.Equal(t, uint64(5), streamMsgs(t, js))
}

func TestAckTimeoutRetriesWithTheSameEventID(t *testing.T) {
	_, nc, js := natstest.StartJS(t)
	// A plain subscriber on the attempt subjects answers nothing: publishes
	// get neither an ack nor a no-responders status, only the ack timeout.
	var mu sync.Mutex
	var seen []string
	sub, err := nc.Subscribe(names.AttemptsSubjects, func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, m.Header.Get(jetstream.MsgIDHeader))
	})
	require.NoError(t, err)
	defer func() { _ = sub.Unsubscribe() }()
	copies := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}

	clk := testkit.NewClock()
	p := newPublisher(t, js,
		WithClock(kitClock{clk}),
		WithAckTimeout(time.Second),
		WithBackoff(10*time.Millisecond, 10*time.Millisecond),
		WithRand(func() float64 { return 0 }),
	)
	ev := sampleEvent("sess-ack", "req-ack", "evt-ack-1")
	require.NoError(t, p.Publish(testContext(t), &ev))
	require.Eventually(t, func() bool { return len(copies()) == 1 }, waitFor, time.Millisecond)
	assert.Zero(t, p.Stats().Retries, "no retry before the ack timeout")

	// Time passes: the ack is overdue, the event is published again.
	require.Eventually(t, func() bool {
		clk.Advance(time.Second)
		return len(copies()) >= 2
	}, waitFor, time.Millisecond)
	for _, id := range copies() {
		assert.Equal(t, ev.EventID, id, "every copy carries the event ID")
	}
	assert.Positive(t, p.Stats().Retries)

	// Once a stream takes the subject, the next retry is acked.
	ensureStream(t, js)
	require.Eventually(t, func() bool {
		clk.Advance(time.Second)
		return p.Stats().Acked == 1
	}, waitFor, time.Millisecond)
	requireLanded(t, js, []events.Attempt{ev})
}

func TestReconnectRepublishesWithoutLossOrDuplicates(t *testing.T) {
	srv := natstest.Start(t)
	u, err := url.Parse(srv.URL())
	require.NoError(t, err)
	port, err := strconv.Atoi(u.Port())
	require.NoError(t, err)
	nc, err := nats.Connect(srv.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(10*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ensureStream(t, js)
	p := newPublisher(t, js)
	ctx := testContext(t)

	first := makeEvents("first", 100)
	publishAll(t, p, first)
	srv.Shutdown()
	second := makeEvents("second", 100)
	publishAll(t, p, second)

	// The same store on the same port: the connection comes back.
	again, err := embedded.Start(&server.Options{
		Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: srv.StoreDir, NoLog: true,
	})
	require.NoError(t, err)
	t.Cleanup(again.Shutdown)

	require.NoError(t, p.Flush(ctx))
	requireLanded(t, js, append(first, second...))
	assert.Equal(t, uint64(200), p.Stats().Acked)
}

func TestPublishRejectsInvalidEvents(t *testing.T) {
	_, _, js := natstest.StartJS(t)
	p := newPublisher(t, js)
	tests := []struct {
		name   string
		mutate func(*events.Attempt)
		field  string
	}{
		{"missing event_id", func(a *events.Attempt) { a.EventID = "" }, "event_id"},
		{"event_id too long", func(a *events.Attempt) { a.EventID = strings.Repeat("e", events.MaxIDLength+1) }, "event_id"},
		{"missing session_id", func(a *events.Attempt) { a.SessionID = "" }, "session_id"},
		{"session_id with a dot", func(a *events.Attempt) { a.SessionID = "a.b" }, "session_id"},
		{"request_id with a wildcard", func(a *events.Attempt) { a.RequestID = "req>" }, "request_id"},
		{"request_id with a space", func(a *events.Attempt) { a.RequestID = "req 1" }, "request_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := sampleEvent("sess", "req", "evt-1")
			tt.mutate(&ev)
			err := p.Publish(testContext(t), &ev)
			require.ErrorIs(t, err, events.ErrInvalidField)
			var fe *events.FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tt.field, fe.Field)
		})
	}
	t.Run("nil event", func(t *testing.T) {
		var fe *events.FieldError
		require.ErrorAs(t, p.Publish(testContext(t), nil), &fe)
		assert.Equal(t, "event", fe.Field)
	})
	t.Run("larger than the contract allows", func(t *testing.T) {
		ev := sampleEvent("sess", "req", "evt-big")
		ev.Error = &events.AttemptError{Kind: events.KindServer, Message: strings.Repeat("m", 700<<10)}
		err := p.Publish(testContext(t), &ev)
		require.ErrorIs(t, err, ErrEventTooLarge)
		data, _ := events.Marshal(&ev)
		assert.ErrorContains(t, err, fmt.Sprintf("is %d bytes as JSON; the contract allows at most %d", len(data), events.MaxEventBytes))
	})
	assert.Zero(t, p.Stats().Enqueued)
}

// An event the contract allows but a server with a small max_payload
// could never take is refused before it is sent, naming both sizes.
func TestPublishRefusesEventOverMaxPayload(t *testing.T) {
	_, _, js := natstest.StartJS(t, natstest.WithMaxPayload(4<<10))
	p := newPublisher(t, js)
	ev := sampleEvent("sess", "req", "evt-big")
	ev.Model = strings.Repeat("m", 5<<10)
	err := p.Publish(testContext(t), &ev)
	require.ErrorIs(t, err, ErrEventTooLarge)
	assert.ErrorContains(t, err, "the server takes at most 4096")
	assert.Zero(t, p.Stats().Enqueued)
}

func TestNewValidatesOptions(t *testing.T) {
	_, _, js := natstest.StartJS(t)
	tests := []struct {
		name   string
		opt    Option
		option string // named in the error
	}{
		{"zero buffer", WithBufferSize(0), "WithBufferSize"},
		{"negative in-flight", WithMaxInFlight(-1), "WithMaxInFlight"},
		{"zero ack timeout", WithAckTimeout(0), "WithAckTimeout"},
		{"zero backoff base", WithBackoff(0, time.Second), "WithBackoff"},
		{"backoff max below base", WithBackoff(time.Second, time.Millisecond), "WithBackoff"},
		{"invalid topology", WithEnsureStream(topology.Config{Replicas: 9}), "WithEnsureStream"},
		{"nil error handler", WithErrorHandler(nil), "WithErrorHandler"},
		{"nil clock", WithClock(nil), "WithClock"},
		{"nil rand", WithRand(nil), "WithRand"},
		{"nil option", nil, "nil Option"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(js, tt.opt)
			require.ErrorIs(t, err, ErrInvalidOption)
			assert.Contains(t, err.Error(), tt.option)
			assert.Nil(t, p)
		})
	}
	t.Run("nil jetstream", func(t *testing.T) {
		p, err := New(nil)
		require.Error(t, err)
		assert.Nil(t, p)
	})
}
