package netlimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Backoff of a failed accept: doubling from the first to the last.
const (
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
)

// Listener is a net.Listener that keeps at most Max connections open.
type Listener struct {
	net.Listener
	max      int
	slots    chan struct{}
	refusals *Refusals
	done     chan struct{}
	once     sync.Once
	open     atomic.Int64
}

// NewListener caps the connections of ln that are open at once at max
// (at least 1). At the cap, Accept waits until one closes (the new ones
// wait in the kernel's backlog), counting and logging ReasonConnectionCap
// in refusals; an accept that fails for want of resources is counted and
// logged as ReasonAcceptError and retried after a backoff rather than
// returned, so that the server keeps serving.
func NewListener(ln net.Listener, max int, refusals *Refusals) (*Listener, error) {
	if max < 1 {
		return nil, fmt.Errorf("netlimit: the connection cap is %d; it must be at least 1", max)
	}
	if refusals == nil {
		return nil, errors.New("netlimit: Refusals is nil; it is required")
	}
	return &Listener{Listener: ln, max: max, slots: make(chan struct{}, max), refusals: refusals, done: make(chan struct{})}, nil
}

// Open is the number of accepted connections not yet closed.
func (l *Listener) Open() int64 { return l.open.Load() }

// Max is the cap.
func (l *Listener) Max() int { return l.max }

// Accept waits for a free slot under the cap, then for a connection.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	default:
		l.refusals.Refuse(context.Background(), ReasonConnectionCap, "at the connection cap: new connections wait until one closes",
			slog.Int("max_connections", l.max))
		select {
		case l.slots <- struct{}{}:
		case <-l.done:
			return nil, net.ErrClosed
		}
	}
	backoff := acceptBackoffMin
	for {
		c, err := l.Listener.Accept()
		if err == nil {
			l.open.Add(1)
			return &conn{Conn: c, l: l}, nil
		}
		if !retryable(err) {
			<-l.slots
			return nil, err
		}
		l.refusals.Refuse(context.Background(), ReasonAcceptError, "accepting a connection failed; retrying",
			slog.String("error", err.Error()), slog.Duration("backoff", backoff))
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-l.done:
			t.Stop()
			<-l.slots
			return nil, net.ErrClosed
		}
		backoff = min(2*backoff, acceptBackoffMax)
	}
}

// retryable reports whether an accept error is one the listener outlives
// (too many open files, a connection reset before it was accepted, ...)
// rather than its end.
func retryable(err error) bool {
	if errors.Is(err, net.ErrClosed) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	return isResourceError(err)
}

// Close closes the listener and ends the Accept waiting for a slot.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// conn gives its slot back when closed.
type conn struct {
	net.Conn
	l    *Listener
	once sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.open.Add(-1)
		<-c.l.slots
	})
	return err
}
