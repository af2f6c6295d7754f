package emit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/retry"
)

// Publisher publishes attempt events to JetStream asynchronously; it is
// the production retry.Sink. Create it with New and end it with Close. All
// methods are safe for concurrent use.
type Publisher struct {
	js         jetstream.JetStream // the caller's: ensures the stream
	pub        jetstream.JetStream // publishes; the Publisher's own when ownPub
	ownPub     bool
	opts       options
	maxPayload int64   // server's max payload at New; 0 when unknown
	outbox     *outbox // nil without WithOutbox
	recovered  uint64  // events read back from the outbox at New

	// queue is the bounded buffer between Publish and the loop. It is
	// never closed: senders may be in flight when Close starts.
	queue chan item

	// mu is held shared by every Publish and Flush while it may send into
	// queue, and exclusively by Close to wait those sends out.
	mu        sync.RWMutex
	closing   chan struct{} // closed by Close: refuse new events
	inputDone chan struct{} // closed by Close once no send into queue can happen
	closeOnce sync.Once

	cancel context.CancelFunc // ends the loop without draining
	done   chan struct{}      // closed when the loop has returned

	enqueued   atomic.Uint64
	acked      atomic.Uint64
	duplicates atomic.Uint64
	retries    atomic.Uint64

	// lastErr is the last failure the loop saw; written by the loop, read
	// only after done is closed.
	lastErr error

	closeMu    sync.Mutex
	closeStats Stats
	closeErr   error
	closed     bool // closeStats and closeErr are final
}

var _ retry.Sink = (*Publisher)(nil)

// item is one entry of the queue: an event ready to publish, or a Flush
// marker.
type item struct {
	subject string
	msgID   string
	data    []byte
	flush   chan struct{} // non-nil for a Flush marker; closed when done
	seg     *segment      // where the outbox keeps the event; nil without one
	size    int64         // the event's size in the outbox
}

// Stats count what a Publisher did (api.PublisherStats): Acked counts
// every event once, however many times it was published, Duplicates
// included (PubAck.Duplicate); Undelivered and Kept are set by Close.
type Stats = api.PublisherStats

// New returns a Publisher and starts its background loop. The caller owns
// the Publisher and must call Close before closing the connection.
//
// The Publisher publishes through a JetStream context of its own on
// js.Conn(), so that its async publisher state (reply subscription, pending
// acks, max pending) is not shared with other users of js; js itself is
// used for the stream look-up and creation of WithEnsureStream, so its
// API prefix or domain applies there.
func New(js jetstream.JetStream, opts ...Option) (*Publisher, error) {
	if js == nil {
		return nil, errors.New("emit: New: jetstream must not be nil")
	}
	o := defaultOptions()
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: nil Option", ErrInvalidOption)
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	p := &Publisher{
		js:        js,
		pub:       js,
		opts:      o,
		closing:   make(chan struct{}),
		inputDone: make(chan struct{}),
		done:      make(chan struct{}),
	}
	var recs []recovered
	if o.outboxDir != "" {
		ob, r, err := openOutbox(o.outboxDir, o.outboxMaxEvents, o.outboxMaxBytes)
		if err != nil {
			return nil, err
		}
		p.outbox, recs = ob, r
	}
	p.queue = make(chan item, queueSize(o, len(recs)))
	for _, r := range recs {
		// The queue has room for every event the outbox may hold.
		r.it.seg, r.it.size = r.seg, r.size
		p.queue <- r.it
	}
	p.recovered = uint64(len(recs))
	p.enqueued.Add(p.recovered)
	if nc := js.Conn(); nc != nil {
		p.maxPayload = nc.MaxPayload()
		// A JetStream context of its own on the caller's connection: its
		// async publisher state (reply subscription, pending acks, max
		// pending) serves only this Publisher, no one else's callbacks see
		// its messages, and Close can release it.
		pub, err := jetstream.New(nc, publisherJSOptions(o)...)
		if err != nil {
			if p.outbox != nil {
				_ = p.outbox.close()
			}
			return nil, fmt.Errorf("emit: New: %w", err)
		}
		p.pub, p.ownPub = pub, true
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	l := newLoop(p)
	go func() {
		defer close(p.done)
		l.run(ctx)
	}()
	return p, nil
}

// queueSize is the capacity of the queue: the buffer size, or with an
// outbox enough for every event it may hold (its limit and what was
// recovered beyond it), so that an event on disk never waits for the queue.
func queueSize(o options, recovered int) int {
	if o.outboxDir == "" {
		return o.bufferSize
	}
	return max(o.bufferSize, o.outboxMaxEvents+recovered)
}

// Publish validates the IDs of ev, marshals it and enqueues it for
// publishing to events.Subject(ev.SessionID, ev.RequestID) with ev.EventID
// as Nats-Msg-Id. It does not wait on the network and does not retain ev.
//
// While the buffer has room Publish enqueues even if ctx is already done,
// so that the event recording a canceled call is not lost. When the buffer
// is full it blocks until there is room, ctx ends (returning ctx's error)
// or Close is called (returning ErrClosed). It returns a *events.FieldError
// naming the field for an invalid event_id, session_id or request_id,
// ErrEventTooLarge for an event over the contract's events.MaxEventBytes
// or the server's max payload (it could never be stored), and ErrClosed
// after Close.
func (p *Publisher) Publish(ctx context.Context, ev *events.Attempt) error {
	if ev == nil {
		return &events.FieldError{Field: "event", Rule: "is nil; an attempt event is required"}
	}
	if err := events.ValidateID("event_id", ev.EventID); err != nil {
		return err
	}
	if err := events.ValidateID("session_id", ev.SessionID); err != nil {
		return err
	}
	if err := events.ValidateID("request_id", ev.RequestID); err != nil {
		return err
	}
	data, err := events.Marshal(ev)
	if err != nil {
		return fmt.Errorf("emit: marshalling event %s: %w", ev.EventID, err)
	}
	if len(data) > events.MaxEventBytes {
		return fmt.Errorf("%w: event %s is %d bytes as JSON; the contract allows at most %d (64 KiB), and the stream would refuse it",
			ErrEventTooLarge, ev.EventID, len(data), events.MaxEventBytes)
	}
	// The header is "NATS/1.0\r\nNats-Msg-Id: <id>\r\n\r\n".
	if size := int64(len(data) + len(ev.EventID) + 27); p.maxPayload > 0 && size > p.maxPayload {
		return fmt.Errorf("%w: event %s is %d bytes on the wire, the server takes at most %d",
			ErrEventTooLarge, ev.EventID, size, p.maxPayload)
	}
	return p.enqueue(ctx, item{
		subject: events.Subject(ev.SessionID, ev.RequestID),
		msgID:   ev.EventID,
		data:    data,
	})
}

func (p *Publisher) enqueue(ctx context.Context, it item) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	select {
	case <-p.closing:
		return ErrClosed
	default:
	}
	event := it.flush == nil
	if event && p.outbox != nil {
		// On disk first: from here on the event survives a crash. The
		// queue then has room (see queueSize).
		if err := p.outbox.add(ctx, p.closing, &it); err != nil {
			return err
		}
	}
	if event {
		// Counted before the send so that Acked never exceeds Enqueued.
		p.enqueued.Add(1)
	}
	select {
	case p.queue <- it:
		return nil
	default:
	}
	select {
	case p.queue <- it:
		return nil
	case <-p.closing:
		p.unqueued(it)
		return ErrClosed
	case <-ctx.Done():
		p.unqueued(it)
		return ctx.Err()
	}
}

// unqueued undoes the count (and the outbox record) of an item that was
// not enqueued after all.
func (p *Publisher) unqueued(it item) {
	if it.flush != nil {
		return
	}
	p.enqueued.Add(^uint64(0))
	if p.outbox != nil {
		p.outbox.ack(it.seg, it.size)
	}
}

// Flush waits until every event enqueued before the call is acknowledged
// by the stream. When ctx ends first it returns a *PendingError with the
// number of events still unacknowledged, wrapping ctx's error. It returns
// ErrClosed when called after Close, or when Close gives up on the events
// before they are acknowledged.
func (p *Publisher) Flush(ctx context.Context) error {
	marker := make(chan struct{})
	if err := p.enqueue(ctx, item{flush: marker}); err != nil {
		if errors.Is(err, ErrClosed) {
			return err
		}
		return &PendingError{Pending: p.pending(), Err: err}
	}
	select {
	case <-marker:
		return nil
	case <-p.done:
		select {
		case <-marker:
			return nil
		default:
			return ErrClosed
		}
	case <-ctx.Done():
		return &PendingError{Pending: p.pending(), Err: ctx.Err()}
	}
}

func (p *Publisher) pending() uint64 {
	acked := p.acked.Load() // before enqueued, so that the difference is not negative
	return p.enqueued.Load() - acked
}

// Stats returns the counters so far. Undelivered is 0 until Close
// returns.
func (p *Publisher) Stats() Stats {
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	if p.closed {
		return p.closeStats
	}
	return p.liveStats()
}

func (p *Publisher) liveStats() Stats {
	s := Stats{
		Duplicates: p.duplicates.Load(),
		Retries:    p.retries.Load(),
		Acked:      p.acked.Load(),
		Recovered:  p.recovered,
	}
	s.Enqueued = p.enqueued.Load()
	if p.outbox != nil {
		s.OutboxEvents = uint64(p.outbox.depth.Load())
		s.OutboxBytes = uint64(p.outbox.depthBytes.Load())
	}
	return s
}

// Close stops accepting events (Publish and Flush return ErrClosed from
// then on, blocked ones included), keeps publishing and retrying the
// buffered events until all are acknowledged or ctx ends, and stops the
// background loop. ctx's deadline is the drain timeout; with a context that
// never ends Close waits as long as the stream is unreachable.
//
// It returns the final Stats and, when some events were never
// acknowledged, an *UndeliveredError (wrapping ErrUndelivered) with their
// count. Close is idempotent and safe to call concurrently: every call
// waits for the drain, the first context to end stops it, and all calls
// return the same result.
func (p *Publisher) Close(ctx context.Context) (Stats, error) {
	p.closeOnce.Do(func() {
		close(p.closing)
		// Wait out every Publish and Flush that might still send: they
		// return at once now that closing is closed.
		p.mu.Lock()
		close(p.inputDone)
		p.mu.Unlock()
	})
	select {
	case <-p.done:
	case <-ctx.Done():
		p.cancel()
		<-p.done
	}
	p.cancel()

	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	if !p.closed {
		st := p.liveStats()
		st.Undelivered = st.Enqueued - st.Acked
		var outboxErr error
		if p.outbox != nil {
			// Every event enqueued is on disk: what was not acked stays
			// there for the next start.
			st.Kept = st.Undelivered
			if err := p.outbox.close(); err != nil {
				outboxErr = fmt.Errorf("emit: closing outbox %s: %w", p.outbox.dir, err)
			}
		}
		p.closeStats, p.closed = st, true
		if st.Undelivered > 0 {
			last := p.lastErr
			if last == nil {
				last = ctx.Err()
			}
			ue := &UndeliveredError{Count: st.Undelivered, Last: last, Kept: st.Kept}
			if p.outbox != nil {
				ue.Outbox = p.outbox.dir
			}
			p.closeErr = ue
		}
		if outboxErr != nil {
			p.closeErr = errors.Join(p.closeErr, outboxErr)
		} // else the *UndeliveredError itself, for a type assertion
	}
	return p.closeStats, p.closeErr
}
