package netlimit

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/testkit"
)

// Refusals log at WARN at most once per interval per reason, with the
// count since the previous record, and count every one.
func TestRefusalsRateLimited(t *testing.T) {
	log, logs := testkit.NewLogger(slog.LevelInfo)
	clk := testkit.NewClock()
	r := NewRefusals(log, time.Second, clk.Now)
	for range 5 {
		r.Refuse(t.Context(), ReasonBodyBudget, "refused")
	}
	r.Refuse(t.Context(), ReasonClientCalls, "refused")
	clk.Advance(time.Second)
	r.Refuse(t.Context(), ReasonBodyBudget, "refused")
	out := logs.String()
	assert.Equal(t, 3, strings.Count(out, `"level":"WARN"`), out)
	assert.Contains(t, out, `"reason":"body_budget","refused":1,"total":1`)
	assert.Contains(t, out, `"reason":"body_budget","refused":5,"total":6`, "the four suppressed and this one")
	c := r.Counts()
	assert.Equal(t, uint64(6), c[ReasonBodyBudget])
	assert.Equal(t, uint64(1), c[ReasonClientCalls])
	assert.Equal(t, uint64(0), c[ReasonConnectionCap], "known reasons start at 0")
}

// failingListener fails its first accepts with EMFILE, then accepts
// pipes.
type failingListener struct {
	mu    sync.Mutex
	fails int
	net.Listener
}

func (l *failingListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fails > 0 {
		l.fails--
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}
	}
	c, _ := net.Pipe()
	return c, nil
}

func (l *failingListener) Close() error { return nil }

// An accept that fails for want of descriptors is retried, logged at
// WARN and counted, not returned (the old server logged it at DEBUG);
// at the cap Accept waits until a connection closes.
func TestListenerRetriesAcceptErrorsAndHoldsTheCap(t *testing.T) {
	log, logs := testkit.NewLogger(slog.LevelInfo)
	ref := NewRefusals(log, time.Hour, nil)
	l, err := NewListener(&failingListener{fails: 3}, 2, ref)
	require.NoError(t, err)
	c1, err := l.Accept()
	require.NoError(t, err)
	assert.Equal(t, uint64(3), ref.Counts()[ReasonAcceptError])
	assert.Contains(t, logs.String(), `"level":"WARN","msg":"accepting a connection failed; retrying"`)
	assert.Contains(t, logs.String(), "too many open files")
	_, err = l.Accept()
	require.NoError(t, err)
	assert.Equal(t, int64(2), l.Open())

	third := make(chan net.Conn)
	go func() {
		c, _ := l.Accept()
		third <- c
	}()
	require.Eventually(t, func() bool { return ref.Counts()[ReasonConnectionCap] == 1 }, 5*time.Second, time.Millisecond)
	select {
	case <-third:
		t.Fatal("a third connection was accepted over the cap")
	default:
	}
	require.NoError(t, c1.Close())
	require.NoError(t, c1.Close(), "closing twice gives one slot back")
	c3 := <-third
	require.NotNil(t, c3)
	assert.Equal(t, int64(2), l.Open())

	// Close ends an Accept waiting at the cap.
	waiting := make(chan error)
	go func() {
		_, err := l.Accept()
		waiting <- err
	}()
	require.Eventually(t, func() bool { return ref.Counts()[ReasonConnectionCap] == 2 }, 5*time.Second, time.Millisecond)
	require.NoError(t, l.Close())
	assert.ErrorIs(t, <-waiting, net.ErrClosed)
}

func TestReadBodyChargesWhatItHolds(t *testing.T) {
	b, err := NewBudget(1 << 20)
	require.NoError(t, err)
	tests := []struct {
		name  string
		body  int
		limit int64
		want  error
	}{
		{"small", 10, 1 << 10, nil},
		{"at the limit", 1 << 10, 1 << 10, nil},
		{"over the limit", 1<<10 + 1, 1 << 10, &TooLargeError{}},
		{"over the budget", 1100 << 10, 2 << 20, ErrBudget},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := bytes.Repeat([]byte("x"), tt.body)
			body, err := ReadBody(iotest.HalfReader(bytes.NewReader(data)), b, tt.limit)
			switch want := tt.want; {
			case want == nil:
				require.NoError(t, err)
				assert.Equal(t, data, body.Bytes)
				assert.Equal(t, max(int64(tt.body), min(minChunk, tt.limit+1)), b.InFlight(), "the body (or its one chunk), not more")
				body.Release()
				body.Release()
			case errors.Is(want, ErrBudget):
				assert.ErrorIs(t, err, ErrBudget)
			default:
				var tl *TooLargeError
				assert.ErrorAs(t, err, &tl)
			}
			assert.Zero(t, b.InFlight(), "nothing stays charged")
		})
	}
	// Another body holding most of the budget leaves no room.
	require.True(t, b.TryAcquire(1<<20-1))
	_, err = ReadBody(strings.NewReader("{}"), b, 1<<10)
	assert.ErrorIs(t, err, ErrBudget)
	b.Release(1<<20 - 1)
	// A read error is returned, nothing charged.
	_, err = ReadBody(iotest.ErrReader(io.ErrUnexpectedEOF), b, 1<<10)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.Zero(t, b.InFlight())
}

func TestPerKey(t *testing.T) {
	p, err := NewPerKey(2)
	require.NoError(t, err)
	r1, ok := p.Acquire("a")
	require.True(t, ok)
	_, ok = p.Acquire("a")
	require.True(t, ok)
	_, ok = p.Acquire("a")
	assert.False(t, ok, "a is at its cap")
	_, ok = p.Acquire("b")
	assert.True(t, ok, "b is not held by a")
	r1()
	r1()
	assert.Equal(t, 1, p.InFlight("a"), "a release counts once")
	_, err = NewPerKey(0)
	assert.Error(t, err)
}

func TestTimeoutsValidate(t *testing.T) {
	ok := Timeouts{BodyTimeout: time.Second, MinBodyRate: 1, WriteTimeout: time.Second}
	require.NoError(t, ok.Validate())
	for field, bad := range map[string]Timeouts{
		"BodyTimeout":  {MinBodyRate: 1, WriteTimeout: time.Second},
		"MinBodyRate":  {BodyTimeout: time.Second, WriteTimeout: time.Second},
		"WriteTimeout": {BodyTimeout: time.Second, MinBodyRate: 1},
	} {
		assert.ErrorContains(t, bad.Validate(), field)
	}
}

// At the cap, a new connection takes the slot of the longest idle one,
// which the listener closes; an active or just-opened one is never
// closed for it.
func TestListenerEvictsTheLongestIdleAtTheCap(t *testing.T) {
	ref := NewRefusals(nil, 0, nil)
	l, err := NewListener(&failingListener{}, 3, ref)
	require.NoError(t, err)
	clk := testkit.NewClock()
	l.now = clk.Now
	advance := clk.Advance
	var cs []net.Conn
	for range 3 {
		c, err := l.Accept()
		require.NoError(t, err)
		cs = append(cs, c)
	}
	l.ConnState(cs[0], http.StateActive)
	l.ConnState(cs[1], http.StateIdle)
	advance(time.Millisecond)
	l.ConnState(cs[2], http.StateIdle) // idle since later
	c4, err := l.Accept()
	require.NoError(t, err, "the new connection is served at once")
	assert.Equal(t, uint64(1), l.Evicted())
	assert.Equal(t, int64(3), l.Open())
	_, err = cs[1].Write([]byte("x"))
	assert.ErrorIs(t, err, io.ErrClosedPipe, "the longest idle connection was closed")
	l.ConnState(cs[2], http.StateActive)
	l.ConnState(c4, http.StateNew)

	waiting := make(chan net.Conn)
	go func() {
		c, _ := l.Accept()
		waiting <- c
	}()
	require.Eventually(t, func() bool { return ref.Counts()[ReasonConnectionCap] == 2 }, 5*time.Second, time.Millisecond)
	select {
	case <-waiting:
		t.Fatal("an active or just-opened connection was closed for a new one")
	default:
	}
	assert.Equal(t, uint64(1), l.Evicted())
	require.NoError(t, cs[0].Close())
	c5 := <-waiting
	require.NotNil(t, c5)
	l.ConnState(c5, http.StateActive)

	// Silent for the grace since it connected, c4 makes room.
	advance(NewConnGrace)
	_, err = l.Accept()
	require.NoError(t, err)
	assert.Equal(t, uint64(2), l.Evicted())
	_, err = c4.Write([]byte("x"))
	assert.ErrorIs(t, err, io.ErrClosedPipe)
}

// The wrapped writer's flush reports a client gone, as the server's does
// (a stream stops at it).
func TestWrapFlushReportsErrors(t *testing.T) {
	flushed := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w, _, done := Timeouts{BodyTimeout: time.Second, MinBodyRate: 1, WriteTimeout: time.Second}.Wrap(w, r)
		defer done()
		rc := http.NewResponseController(w)
		var err error
		for err == nil {
			_, _ = w.Write(bytes.Repeat([]byte("x"), 64<<10))
			err = rc.Flush()
		}
		flushed <- err
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	buf := make([]byte, 1024)
	_, err = io.ReadFull(resp.Body, buf)
	require.NoError(t, err)
	resp.Body.Close() // the client goes
	select {
	case err := <-flushed:
		assert.Error(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the flush never failed")
	}
}
