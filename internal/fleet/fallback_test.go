package fleet

import (
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/embedded"
	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/retry"
	"github.com/agentledger/ledger/internal/testkit"
)

const (
	logUnavailable = "the shared upstream state is unavailable"
	logUsing       = "using the shared upstream state"
)

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// When NATS goes away every process falls back to its local state (the
// log says so once), calls go on without waiting for it, and when it
// comes back (on the same port, its memory bucket lost) the shared state
// is rebuilt and used again.
func TestFallbackWhenNATSGoesAwayAndComesBack(t *testing.T) {
	dir, port := t.TempDir(), freePort(t)
	opts := func() *server.Options {
		return &server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true}
	}
	srv, err := embedded.Start(opts())
	require.NoError(t, err)
	url := srv.URL()
	clk := testkit.NewClockNow()
	pc := breakerConfig(2, time.Hour)
	pc.wait = 300 * time.Millisecond
	pc.guards.Budget = guard.Budget{On: true, Ratio: 0.2, Min: 1}
	pc.policy = retry.Policy{MaxRetries: 1, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond, HintCap: time.Hour}
	a := startProc(t, url, clk, "proc-a", pc)
	b := startProc(t, url, clk, "proc-b", pc)

	srv.Shutdown()
	eventually(t, "both processes fall back, and say so", func() bool {
		return !a.fleet.Healthy() && !b.fleet.Healthy() &&
			strings.Contains(a.logs.String(), logUnavailable) && strings.Contains(b.logs.String(), logUnavailable)
	})
	// Calls go on with the local state: a's two failures open a's own
	// breaker (a retry from the local budget between them); b is not told.
	begin := time.Now()
	require.Error(t, a.call(fail503))
	require.Error(t, a.call(fail503))
	assert.Less(t, time.Since(begin), 2*time.Second, "no call waited for NATS")
	assert.ErrorIs(t, a.call(succeed), retry.ErrCircuitOpen)
	require.NoError(t, b.call(succeed))
	for _, p := range []*proc{a, b} {
		assert.Equal(t, 1, strings.Count(p.logs.String(), logUnavailable), "%s logs the fallback once: %s", p.name, p.logs)
	}

	restarted := time.Now()
	srv2, err := embedded.Start(opts())
	require.NoError(t, err)
	t.Cleanup(srv2.Shutdown)
	// The return is logged just after the state turns healthy: wait for
	// both (checking the log at once failed on a fresh clone's CI run).
	eventually(t, "both processes use the shared state again, and say so", func() bool {
		return a.fleet.Healthy() && b.fleet.Healthy() &&
			strings.Count(a.logs.String(), logUsing) >= 2 && strings.Count(b.logs.String(), logUsing) >= 2
	})
	t.Logf("the shared state was back %v after NATS restarted", time.Since(restarted))
	for _, p := range []*proc{a, b} {
		assert.Equal(t, 2, strings.Count(p.logs.String(), logUsing), "%s logs the start and the return: %s", p.name, p.logs)
		assert.Equal(t, uint64(1), p.fleet.Stats().Degraded)
	}
	// Shared again: the fleet's breaker (closed: the bucket was lost)
	// decides for a, and b's failures open it for a.
	require.NoError(t, a.call(succeed))
	require.Error(t, b.call(fail503))
	require.Error(t, b.call(fail503))
	eventually(t, "a sees b's breaker", a.isOpen)
	var oe *OpenError
	require.ErrorAs(t, a.call(succeed), &oe)
	assert.Equal(t, "proc-b", oe.By)
	// Closed while the server is up (a Close racing the server's shutdown
	// may wait for its watcher's consumer to be deleted).
	a.fleet.Close()
	b.fleet.Close()
}

// When NATS is slow (a connection that stalls without breaking), a call
// waits for the shared state no longer than Options.Wait, then decides
// locally; the Fleet degrades once and recovers when NATS answers again.
func TestSlowNATSHoldsACallAtMostTheWait(t *testing.T) {
	srv, err := embedded.Start(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	px := newProxy(t, srv.URL())
	clk := testkit.NewClockNow()
	const wait = 300 * time.Millisecond
	pc := procConfig{wait: wait,
		guards: guard.Config{Budget: guard.Budget{On: true, Ratio: 0.2, Min: 5}, Breaker: breaker.Config{FailureThreshold: 100}},
		policy: retry.Policy{MaxRetries: 1, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond, HintCap: time.Hour}}
	a := startProc(t, px.url(), clk, "proc-a", pc)

	px.freeze()
	begin := time.Now()
	err = a.call(fail503) // the retry asks the budget: the shared state does not answer
	took := time.Since(begin)
	require.Error(t, err)
	assert.Len(t, a.sink.Events(), 2, "the retry went ahead on the local budget")
	assert.GreaterOrEqual(t, took, wait)
	assert.Less(t, took, wait+time.Second, "the call was held about the wait, no longer")
	assert.False(t, a.fleet.Healthy())
	t.Logf("the first call was held %v", took)
	begin = time.Now()
	for range 5 {
		_ = a.call(fail503)
	}
	assert.Less(t, time.Since(begin), wait, "once degraded, calls do not wait at all")
	assert.Equal(t, 1, strings.Count(a.logs.String(), logUnavailable))

	px.thaw()
	thawed := time.Now()
	eventually(t, "the shared state is back", a.fleet.Healthy)
	t.Logf("back %v after NATS answered again", time.Since(thawed))
	assert.Equal(t, 1, strings.Count(a.logs.String(), logUnavailable))
}

// proxy forwards TCP connections to a NATS server and can stall them.
type proxy struct {
	t      *testing.T
	l      net.Listener
	target string

	mu     sync.Mutex
	frozen bool
	cond   *sync.Cond
}

func newProxy(t *testing.T, natsURL string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{t: t, l: l, target: strings.TrimPrefix(natsURL, "nats://")}
	p.cond = sync.NewCond(&p.mu)
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); p.thaw(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			wg.Go(func() { p.pipe(s, c) })
			wg.Go(func() { p.pipe(c, s) })
		}
	})
	return p
}

func (p *proxy) url() string {
	return "nats://127.0.0.1:" + strconv.Itoa(p.l.Addr().(*net.TCPAddr).Port)
}

// pipe copies from src to dst, holding what it read while frozen.
func (p *proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.frozen {
				p.cond.Wait()
			}
			p.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *proxy) freeze() {
	p.mu.Lock()
	p.frozen = true
	p.mu.Unlock()
}

func (p *proxy) thaw() {
	p.mu.Lock()
	p.frozen = false
	p.cond.Broadcast()
	p.mu.Unlock()
}
