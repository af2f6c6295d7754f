package emit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/topology"
)

// loop is the publisher's background goroutine and all the state only it
// touches. It takes events from the queue while it holds fewer than
// maxInFlight, publishes them with PublishMsgAsync, and awaits their acks
// in the order they were sent: only the oldest publish is watched, so one
// goroutine serves the whole pipeline. A failed publish (error, or no ack
// within the ack timeout) goes to the retry ring with a due time; it is
// published again, with the same Nats-Msg-Id, when due.
type loop struct {
	p     *Publisher
	js    jetstream.JetStream
	o     options
	clock Clock
	timer Timer

	inflight ring // sent, awaiting the ack; in send order
	retry    ring // failed (or held), awaiting their due time

	// hold is set after PublishMsgAsync itself failed (connection closed,
	// reconnect buffer full, async publisher stalled): nothing is sent
	// before it, so that one failure is not repeated for every event.
	hold time.Time

	seq     uint64   // events taken from the queue; an event's seq is its rank
	acked   uint64   // events acked, as counted by the loop
	markers []marker // pending Flush calls

	needEnsure  bool
	ensureTries int
	ensureDue   time.Time

	draining bool // Close was called and no more events can arrive

	pubOpts []jetstream.PublishOpt
	// free holds messages whose publish is over, for reuse by send; only
	// when the publishing context is the Publisher's own (see recycle).
	free []*nats.Msg
}

// entry is one event held by the loop.
type entry struct {
	subject string
	msgID   string
	data    []byte
	seq     uint64
	tries   int       // publishes so far
	at      time.Time // in flight: when sent; in retry: when due
	msg     *nats.Msg
	paf     jetstream.PubAckFuture
	ok      <-chan *jetstream.PubAck // paf's channels, fetched once the entry is the oldest in flight
	err     <-chan error
	seg     *segment // where the outbox keeps the event; nil without one
	size    int64
}

// marker is a Flush waiting for the events of rank <= upTo.
type marker struct {
	upTo      uint64
	remaining uint64
	done      chan struct{}
}

func newLoop(p *Publisher) *loop {
	return &loop{
		p:          p,
		js:         p.pub,
		o:          p.opts,
		clock:      p.opts.clock,
		timer:      p.opts.clock.NewTimer(),
		inflight:   newRing(p.opts.maxInFlight),
		retry:      newRing(p.opts.maxInFlight),
		needEnsure: p.opts.ensure,
		// Retries are the loop's, with its backoff, not the client's.
		pubOpts: []jetstream.PublishOpt{jetstream.WithRetryAttempts(0)},
	}
}

func (l *loop) outstanding() int { return l.inflight.n + l.retry.n }

func (l *loop) run(ctx context.Context) {
	defer l.timer.Stop()
	if l.p.ownPub {
		// Release the context's reply subscription and status listener;
		// publishes still pending are given up (Close counts them).
		defer l.js.CleanupPublisher()
	}
	inputDone := l.p.inputDone
	for {
		now := l.clock.Now()
		l.reap(now)
		if ctx.Err() != nil {
			return
		}
		if l.needEnsure && !now.Before(l.ensureDue) {
			l.ensure(ctx)
			now = l.clock.Now()
		}
		l.sendDue(ctx, now)
		l.take(now)
		if l.draining && l.outstanding() == 0 && len(l.p.queue) == 0 {
			return
		}

		// Nothing to do at once: wait for the oldest ack, a new event, the
		// next due time, Close, or the end.
		var okC <-chan *jetstream.PubAck
		var errC <-chan error
		if l.inflight.n > 0 {
			h := l.inflight.front()
			l.watch(h)
			okC, errC = h.ok, h.err
		}
		var queueC chan item
		if l.outstanding() < l.o.maxInFlight {
			queueC = l.p.queue
		}
		var timerC <-chan time.Time
		if at, ok := l.nextDue(); ok {
			l.timer.Reset(at.Sub(now))
			timerC = l.timer.C()
		}
		var inputC chan struct{}
		if !l.draining {
			inputC = inputDone
		}
		select {
		case ack := <-okC:
			l.onAck(l.inflight.pop(), ack)
		case err := <-errC:
			l.onFail(l.inflight.pop(), err, l.clock.Now())
		case it := <-queueC:
			l.accept(it, l.clock.Now())
		case <-timerC:
			timerC = nil
		case <-inputC:
			l.draining = true
		case <-ctx.Done():
			return
		}
		if timerC != nil {
			l.timer.Stop()
		}
	}
}

// nextDue is the earliest time at which the loop has something to do
// without an outside event: the oldest publish's ack is overdue, a retry
// is due, the stream is to be ensured.
func (l *loop) nextDue() (time.Time, bool) {
	var at time.Time
	ok := false
	earliest := func(t time.Time) {
		if !ok || t.Before(at) {
			at, ok = t, true
		}
	}
	if l.inflight.n > 0 {
		earliest(l.inflight.front().at.Add(l.o.ackTimeout))
	}
	if l.retry.n > 0 {
		due := l.retry.front().at
		if due.Before(l.hold) {
			due = l.hold
		}
		earliest(due)
	}
	if l.needEnsure {
		earliest(l.ensureDue)
	}
	return at, ok
}

// watch fetches the ack channels of e, which is now the oldest in flight.
func (l *loop) watch(e *entry) {
	if e.ok == nil {
		e.ok, e.err = e.paf.Ok(), e.paf.Err()
	}
}

// reap handles, oldest first, the publishes whose outcome is known: acked,
// failed, or without an ack past the ack timeout.
func (l *loop) reap(now time.Time) {
	for l.inflight.n > 0 {
		h := l.inflight.front()
		l.watch(h)
		select {
		case ack := <-h.ok:
			l.onAck(l.inflight.pop(), ack)
		case err := <-h.err:
			l.onFail(l.inflight.pop(), err, now)
		default:
			if now.Sub(h.at) < l.o.ackTimeout {
				return
			}
			l.onFail(l.inflight.pop(), jetstream.ErrAsyncPublishTimeout, now)
		}
	}
}

// sendDue publishes the retries that are due.
func (l *loop) sendDue(ctx context.Context, now time.Time) {
	for l.retry.n > 0 && !l.retry.front().at.After(now) && !now.Before(l.hold) {
		if ctx.Err() != nil {
			return
		}
		l.send(l.retry.pop(), now)
	}
}

// take accepts queued items while the loop has room for events.
func (l *loop) take(now time.Time) {
	for l.outstanding() < l.o.maxInFlight {
		select {
		case it := <-l.p.queue:
			l.accept(it, now)
		default:
			return
		}
	}
}

func (l *loop) accept(it item, now time.Time) {
	if it.flush != nil {
		// Every event taken so far has rank <= l.seq, and every acked one
		// is among them.
		if l.seq == l.acked {
			close(it.flush)
			return
		}
		l.markers = append(l.markers, marker{upTo: l.seq, remaining: l.seq - l.acked, done: it.flush})
		return
	}
	l.seq++
	e := entry{subject: it.subject, msgID: it.msgID, data: it.data, seq: l.seq, seg: it.seg, size: it.size}
	if now.Before(l.hold) {
		e.at = l.hold
		l.retry.push(e)
		return
	}
	l.send(e, now)
}

// send publishes e. The message and its header are e's own: they are
// never shared between publishes in flight.
func (l *loop) send(e entry, now time.Time) {
	if e.tries > 0 {
		l.p.retries.Add(1)
	}
	e.tries++
	msg := l.newMsg(e)
	paf, err := l.js.PublishMsgAsync(msg, l.pubOpts...)
	if err != nil {
		l.recycle(msg)
		l.onFail(e, err, now)
		l.hold = now.Add(l.o.backoffBase)
		if l.p.ownPub && errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			// Our window leaves room in the context's max pending, so it is
			// full of publishes the loop gave up on after its ack timeout
			// and that the server never answered. Fail them all and start
			// afresh; those still in the window are retried.
			l.js.CleanupPublisher()
		}
		return
	}
	e.msg, e.paf, e.at = msg, paf, now
	l.inflight.push(e)
}

// newMsg returns the message that publishes e.
func (l *loop) newMsg(e entry) *nats.Msg {
	var msg *nats.Msg
	if n := len(l.free); n > 0 {
		msg, l.free = l.free[n-1], l.free[:n-1]
		msg.Header[jetstream.MsgIDHeader][0] = e.msgID
	} else {
		msg = &nats.Msg{Header: nats.Header{jetstream.MsgIDHeader: []string{e.msgID}}}
	}
	msg.Subject, msg.Data = e.subject, e.data
	return msg
}

// recycle keeps msg for reuse once its publish is over. That is safe only
// on the Publisher's own JetStream context: without client-side retries
// (WithRetryAttempts(0)) and without ack or error handlers, the client
// reads a message only inside PublishMsgAsync, which copies the header into
// the connection's buffer before it returns.
func (l *loop) recycle(msg *nats.Msg) {
	if !l.p.ownPub || msg == nil || len(l.free) >= l.o.maxInFlight {
		return
	}
	msg.Subject, msg.Data = "", nil
	msg.Header[jetstream.MsgIDHeader][0] = ""
	l.free = append(l.free, msg)
}

func (l *loop) onAck(e entry, ack *jetstream.PubAck) {
	l.recycle(e.msg)
	if l.p.outbox != nil {
		l.p.outbox.ack(e.seg, e.size)
	}
	l.acked++
	l.p.acked.Add(1)
	if ack != nil && ack.Duplicate {
		l.p.duplicates.Add(1)
	}
	for i := 0; i < len(l.markers); {
		m := &l.markers[i]
		if e.seq <= m.upTo {
			m.remaining--
			if m.remaining == 0 {
				close(m.done)
				l.markers = append(l.markers[:i], l.markers[i+1:]...)
				continue
			}
		}
		i++
	}
}

// onFail schedules the retry of e after a failed publish.
func (l *loop) onFail(e entry, err error, now time.Time) {
	l.p.lastErr = err
	if l.o.onError != nil {
		l.o.onError(fmt.Errorf("emit: publishing event %s to %s (try %d): %w", e.msgID, e.subject, e.tries, err))
	}
	if l.o.ensure && noStream(err) {
		l.needEnsure = true
	}
	l.recycle(e.msg)
	e.msg, e.paf, e.ok, e.err = nil, nil, nil, nil
	e.at = now.Add(Backoff(e.tries, l.o.backoffBase, l.o.backoffMax, l.o.rand()))
	l.retry.push(e)
}

// noStream reports whether err says that no stream took the subject.
func noStream(err error) bool {
	return errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, jetstream.ErrStreamNotFound)
}

// ensure creates the attempt stream when it is missing.
func (l *loop) ensure(ctx context.Context) {
	ectx, cancel := context.WithTimeout(ctx, l.o.ackTimeout)
	_, err := topology.EnsureAttempts(ectx, l.p.js, l.o.topology)
	cancel()
	if err == nil {
		l.needEnsure, l.ensureTries = false, 0
		return
	}
	if ctx.Err() != nil {
		return
	}
	l.ensureTries++
	l.ensureDue = l.clock.Now().Add(Backoff(l.ensureTries, l.o.backoffBase, l.o.backoffMax, l.o.rand()))
	l.p.lastErr = err
	if l.o.onError != nil {
		l.o.onError(fmt.Errorf("emit: ensuring the attempt stream (try %d): %w", l.ensureTries, err))
	}
}

// ring is a fixed-capacity FIFO of entries.
type ring struct {
	buf  []entry
	head int
	n    int
}

func newRing(capacity int) ring { return ring{buf: make([]entry, capacity)} }

func (r *ring) push(e entry) {
	if r.n == len(r.buf) {
		panic("emit: ring overflow") // the loop never holds more than maxInFlight
	}
	r.buf[(r.head+r.n)%len(r.buf)] = e
	r.n++
}

func (r *ring) front() *entry { return &r.buf[r.head] }

func (r *ring) pop() entry {
	e := r.buf[r.head]
	r.buf[r.head] = entry{}
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	return e
}
