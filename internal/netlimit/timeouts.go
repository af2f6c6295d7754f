package netlimit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// Defaults of Timeouts.
const (
	DefaultBodyTimeout  = 10 * time.Second
	DefaultMinBodyRate  = 32 << 10 // bytes a second
	DefaultWriteTimeout = time.Minute
)

// Timeouts bound what a slow client holds of a request, without a total
// that would cut a long stream. Set the server's ReadHeaderTimeout and
// IdleTimeout for the rest of a connection's life, and leave its
// ReadTimeout and WriteTimeout at 0: the first would cancel a request's
// context once its deadline passes, the second cut every stream at it.
type Timeouts struct {
	// BodyTimeout, plus one second per MinBodyRate bytes received, is
	// how long the body may take to arrive: a body trickling in slower
	// than MinBodyRate is cut after about BodyTimeout.
	BodyTimeout time.Duration
	MinBodyRate int64
	// WriteTimeout bounds each write to the client (each event of a
	// stream), from when it starts: a client that stops reading is cut,
	// one that reads a long stream is not.
	WriteTimeout time.Duration
}

// Validate checks t, naming the field.
func (t Timeouts) Validate() error {
	switch {
	case t.BodyTimeout <= 0:
		return fmt.Errorf("BodyTimeout is %s; it must be positive", t.BodyTimeout)
	case t.MinBodyRate <= 0:
		return fmt.Errorf("MinBodyRate is %d; it must be positive", t.MinBodyRate)
	case t.WriteTimeout <= 0:
		return fmt.Errorf("WriteTimeout is %s; it must be positive", t.WriteTimeout)
	}
	return nil
}

// Wrap returns w and r with t applied: the body read against its
// deadline (cleared once the body is read, so that the server's
// background read cannot cancel a stream), and every write given
// WriteTimeout. The request's connection keeps no deadline of a previous
// request. done must be called when the handler returns.
func (t Timeouts) Wrap(w http.ResponseWriter, r *http.Request) (_ http.ResponseWriter, _ *http.Request, done func()) {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a deadline a previous request left on the connection
	dw := &deadlineWriter{ResponseWriter: w, rc: rc, d: t.WriteTimeout}
	if r.Body != nil && r.Body != http.NoBody {
		body := &deadlineBody{rc: rc, r: r.Body, start: time.Now(), t: t}
		body.extend()
		r = r.WithContext(context.WithValue(r.Context(), bodyKey{}, body))
		r.Body = body
	}
	return dw, r, func() {
		// The response's last bytes are flushed after the handler
		// returns: they get a write timeout too.
		_ = rc.SetWriteDeadline(time.Now().Add(t.WriteTimeout))
	}
}

// deadlineBody reads a body against a deadline that grows with what has
// arrived.
type deadlineBody struct {
	rc    *http.ResponseController
	r     io.ReadCloser
	start time.Time
	t     Timeouts
	n     int64
	// ended and deadline (unix nanos) are read by other goroutines than
	// the reader's.
	ended    atomic.Bool
	deadline atomic.Int64
}

// bodyKey is the context key of a request's deadlineBody.
type bodyKey struct{}

// TimedOut reports whether the body of r (a request Wrap returned, or one
// made from it, as a reverse proxy's) did not arrive in time: not read to
// its end, and its deadline passed. A reverse proxy may see the request's
// context cancelled (the server cancels it when a read times out) rather
// than ErrBodyTimeout.
func TimedOut(r *http.Request) bool {
	b, ok := r.Context().Value(bodyKey{}).(*deadlineBody)
	return ok && !b.ended.Load() && time.Now().UnixNano() >= b.deadline.Load()
}

// ErrBodyTimeout is the error of reading a body that did not arrive in
// time.
var ErrBodyTimeout = errors.New("the request body did not arrive in time")

func (b *deadlineBody) extend() {
	d := b.t.BodyTimeout + time.Duration(float64(b.n)/float64(b.t.MinBodyRate)*float64(time.Second))
	b.deadline.Store(b.start.Add(d).UnixNano())
	_ = b.rc.SetReadDeadline(b.start.Add(d))
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.n += int64(n)
	switch {
	case b.ended.Load():
	case err == io.EOF:
		b.ended.Store(true)
		_ = b.rc.SetReadDeadline(time.Time{})
	case err != nil:
		var te interface{ Timeout() bool }
		if errors.As(err, &te) && te.Timeout() {
			err = fmt.Errorf("%w (%d bytes in %s)", ErrBodyTimeout, b.n, time.Since(b.start).Round(time.Millisecond))
		}
	case n > 0:
		b.extend()
	}
	return n, err
}

func (b *deadlineBody) Close() error { return b.r.Close() }

// deadlineWriter gives every write its own deadline.
type deadlineWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	return w.ResponseWriter.Write(p)
}

// FlushError flushes with a deadline of its own (the buffered bytes may
// be many), and returns the error of a client gone; http.ResponseController
// calls it.
func (w *deadlineWriter) FlushError() error {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	return w.rc.Flush()
}

// Flush is FlushError for the http.Flusher of older code.
func (w *deadlineWriter) Flush() { _ = w.FlushError() }

// Unwrap lets http.ResponseController reach the server's writer.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
