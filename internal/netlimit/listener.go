package netlimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Backoff of a failed accept: doubling from the first to the last.
const (
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
)

// NewConnGrace is how long a connection may stay silent (no byte of a
// request yet) before the Listener may close it to make room at the cap.
const NewConnGrace = time.Second

// Listener is a net.Listener that keeps at most Max connections open.
// Set its ConnState as the http.Server's, so that at the cap it can make
// room by closing a connection that holds a slot without using it.
type Listener struct {
	net.Listener
	max      int
	slots    chan struct{}
	refusals *Refusals
	done     chan struct{}
	once     sync.Once
	open     atomic.Int64
	evicted  atomic.Uint64
	now      func() time.Time // of the connections' states

	mu    sync.Mutex
	conns map[*conn]struct{}
}

// NewListener caps the connections of ln that are open at once at max
// (at least 1). A connection that comes at the cap takes the slot of an
// idle keep-alive connection, or of one silent for NewConnGrace since it
// connected (the longest such first), which the Listener closes; when
// there is none it waits until a connection closes. Either way the cap
// is counted and logged as ReasonConnectionCap in refusals. An accept
// that fails for want of resources is counted and logged as
// ReasonAcceptError and retried after a backoff rather than returned, so
// that the server keeps serving.
func NewListener(ln net.Listener, max int, refusals *Refusals) (*Listener, error) {
	if max < 1 {
		return nil, fmt.Errorf("netlimit: the connection cap is %d; it must be at least 1", max)
	}
	if refusals == nil {
		return nil, errors.New("netlimit: Refusals is nil; it is required")
	}
	return &Listener{Listener: ln, max: max, slots: make(chan struct{}, max), refusals: refusals, done: make(chan struct{}),
		conns: make(map[*conn]struct{}), now: time.Now}, nil
}

// Open is the number of accepted connections not yet closed.
func (l *Listener) Open() int64 { return l.open.Load() }

// Max is the cap.
func (l *Listener) Max() int { return l.max }

// Evicted is the number of connections closed to make room at the cap.
func (l *Listener) Evicted() uint64 { return l.evicted.Load() }

// Accept waits for a connection, then for a slot under the cap.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.accept()
	if err != nil {
		return nil, err
	}
	select {
	case l.slots <- struct{}{}:
	default:
		evicted := l.evict()
		l.refusals.Refuse(context.Background(), ReasonConnectionCap, "at the connection cap: a new connection waits until one closes, or takes the slot of an idle one",
			slog.Int("max_connections", l.max), slog.Bool("evicted_idle", evicted))
		select {
		case l.slots <- struct{}{}:
		case <-l.done:
			c.Close()
			return nil, net.ErrClosed
		}
	}
	l.open.Add(1)
	w := &conn{Conn: c, l: l}
	w.setState(http.StateNew)
	l.mu.Lock()
	l.conns[w] = struct{}{}
	l.mu.Unlock()
	return w, nil
}

// accept accepts a connection, retrying the errors a server outlives.
func (l *Listener) accept() (net.Conn, error) {
	backoff := acceptBackoffMin
	for {
		c, err := l.Listener.Accept()
		if err == nil {
			return c, nil
		}
		if !retryable(err) {
			return nil, err
		}
		l.refusals.Refuse(context.Background(), ReasonAcceptError, "accepting a connection failed; retrying",
			slog.String("error", err.Error()), slog.Duration("backoff", backoff))
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-l.done:
			t.Stop()
			return nil, net.ErrClosed
		}
		backoff = min(2*backoff, acceptBackoffMax)
	}
}

// evict closes the connection that has held its slot the longest without
// using it: idle between requests, or silent since it connected for
// NewConnGrace. It reports whether there was one.
func (l *Listener) evict() bool {
	now := l.now().UnixNano()
	var victim *conn
	var since int64
	l.mu.Lock()
	for c := range l.conns {
		st, t := c.stateSince()
		evictable := st == http.StateIdle || st == http.StateNew && now-t >= int64(NewConnGrace)
		if evictable && (victim == nil || t < since) {
			victim, since = c, t
		}
	}
	l.mu.Unlock()
	if victim == nil {
		return false
	}
	l.evicted.Add(1)
	victim.Close()
	return true
}

// ConnState records the state of the Listener's connections; set it as
// the http.Server's ConnState.
func (l *Listener) ConnState(c net.Conn, s http.ConnState) {
	if w, ok := c.(*conn); ok && w.l == l {
		w.setState(s)
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

// conn gives its slot back when closed, and keeps its HTTP state.
type conn struct {
	net.Conn
	l     *Listener
	once  sync.Once
	mu    sync.Mutex
	st    http.ConnState
	since int64
}

func (c *conn) setState(s http.ConnState) {
	c.mu.Lock()
	c.st, c.since = s, c.l.now().UnixNano()
	c.mu.Unlock()
}

func (c *conn) stateSince() (http.ConnState, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st, c.since
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
		c.l.open.Add(-1)
		<-c.l.slots
	})
	return err
}
