package gateway

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/netlimit"
)

// gate is an upstream step that holds every request until open, telling
// arrived of each.
type gate struct {
	arrived chan struct{}
	open    chan struct{}
	once    sync.Once
}

func newGate() *gate { return &gate{arrived: make(chan struct{}, 100), open: make(chan struct{})} }

func (g *gate) step(w http.ResponseWriter, r *http.Request) {
	g.arrived <- struct{}{}
	<-g.open
	reply(200, anthropicOK)(w, r)
}

func (g *gate) release() { g.once.Do(func() { close(g.open) }) }

// waitArrivals waits for n requests at the gate.
func (g *gate) waitArrivals(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-g.arrived:
		case <-time.After(10 * time.Second):
			t.Fatalf("fewer than %d requests reached the upstream", n)
		}
	}
}

// fixedNow is a clock that does not move: Refusals log each reason once.
func fixedNow() time.Time { return time.Unix(1_700_000_000, 0) }

// Concurrent uploads stay under the byte budget: the bodies held at once
// never pass it (nor do those reaching the upstream), and the calls it
// cannot cover get 503 with retry-after, counted and logged at WARN once
// (rate-limited) with the count. The old gateway took every body whole,
// with no budget.
func TestConcurrentUploadsStayUnderTheByteBudget(t *testing.T) {
	// A 300 KiB body is read into chunks of 508 KiB and copied whole:
	// 808 KiB at its peak, 300 KiB held after. One fits beside another.
	const budget, body, uploads = 1200 << 10, 300 << 10, 8
	g := newGate()
	defer g.release()
	up := startScripted(t, g.step)
	h := newHarness(t, up.srv.URL, func(c *Config) {
		c.MaxRequestBytes = 512 << 10
		c.Limits.MaxBodyBytesInFlight = budget
		c.Limits.MaxCallsPerClient = uploads
		c.Limits.Refusals = netlimit.NewRefusals(c.Logger, time.Second, fixedNow)
	})
	payload := `{"model":"claude-test","max_tokens":1,"messages":[{"role":"user","content":"` + strings.Repeat("x", body) + `"}]}`
	type result struct {
		status     int
		retryAfter string
	}
	results := make(chan result, uploads)
	var wg sync.WaitGroup
	send := func() {
		wg.Go(func() {
			resp := h.post("/v1/messages", payload, "X-Api-Key", "k")
			_, _ = read(resp)
			results <- result{resp.StatusCode, resp.Header.Get("Retry-After")}
		})
	}
	send()
	g.waitArrivals(t, 1) // one holds its body at the upstream
	for range uploads - 1 {
		send()
	}
	// Each of the others either reaches the upstream (and holds its body
	// there) or is refused.
	arrived, refused := 1, 0
	for arrived+refused < uploads {
		select {
		case <-g.arrived:
			arrived++
		case r := <-results:
			require.Equal(t, http.StatusServiceUnavailable, r.status, "only a refusal answers before the gate opens")
			assert.Equal(t, "1", r.retryAfter)
			refused++
		case <-time.After(10 * time.Second):
			t.Fatalf("%d uploads neither reached the upstream nor were refused", uploads-arrived-refused)
		}
	}
	assert.Positive(t, refused, "%d uploads of %d KiB do not fit a budget of %d KiB", uploads, body>>10, budget>>10)
	assert.LessOrEqual(t, arrived*body, budget, "the bodies held at the upstream")
	assert.LessOrEqual(t, h.gw.Stats().BodyBytesInFlight, int64(budget))
	g.release()
	wg.Wait()
	close(results)
	for r := range results {
		assert.Equal(t, http.StatusOK, r.status)
	}
	st := h.gw.Stats()
	assert.LessOrEqual(t, h.gw.budget.Peak(), int64(budget), "the bodies held at once")
	assert.Zero(t, st.BodyBytesInFlight, "every body given back")
	assert.Equal(t, uint64(refused), st.Refusals[netlimit.ReasonBodyBudget])
	logs := h.logs.String()
	assert.Equal(t, 1, strings.Count(logs, `"reason":"body_budget"`), "logged once a second, not once a refusal")
	assert.Contains(t, logs, `"level":"WARN","msg":"gateway: request refused`)
}

// A body is read against the budget as it arrives, never reserved from
// its declared Content-Length: connections that declare 30 MB and send a
// few bytes hold a few KiB, and a normal call still gets in under a
// budget smaller than one declared length. The old gateway reserved the
// declared length before a byte arrived.
func TestDeclaredLengthIsNotReserved(t *testing.T) {
	up := startScripted(t, reply(200, anthropicOK))
	h := newHarness(t, up.srv.URL, func(c *Config) {
		c.Limits.MaxBodyBytesInFlight = 1 << 20
	})
	addr := strings.TrimPrefix(h.url, "http://")
	const liars = 5
	for range liars {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		_, err = fmt.Fprintf(c, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nX-Api-Key: k\r\nContent-Length: 30000000\r\n\r\n{\"model\":")
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return h.gw.Stats().BodyBytesInFlight >= liars*4<<10 }, 10*time.Second, 5*time.Millisecond)
	assert.LessOrEqual(t, h.gw.Stats().BodyBytesInFlight, int64(liars*4<<10), "a first chunk each, not 30 MB")
	resp := h.post("/v1/messages", anthropicBody, "X-Api-Key", "k2")
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	// A declared length over the per-request limit is refused before a
	// byte of the body is read (the old gateway read 38 MB first).
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = fmt.Fprintf(c, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n")
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	resp, err = http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	assert.Equal(t, "too_large", resp.Header.Get(HeaderGatewayError))
}

// A body that trickles in is cut with 408 after the body timeout, counted
// and logged at WARN; a stream that lasts several body timeouts, with
// more than a write timeout between its events, is not cut (each write
// has its own deadline, there is no total, and the body's read deadline
// is cleared once it is read), nor is the next one on the same
// connection. The old gateway waited for a body forever.
func TestSlowBodyCutLongStreamKept(t *testing.T) {
	evs := []string{evStart, evDelta, evDelta, evMsgDelta, evStop}
	up := startScripted(t, pacedSSE(150*time.Millisecond, false, evs...))
	h := newHarness(t, up.srv.URL, func(c *Config) {
		c.Limits.Timeouts = netlimit.Timeouts{BodyTimeout: 200 * time.Millisecond, MinBodyRate: 1 << 20, WriteTimeout: 100 * time.Millisecond}
		c.Limits.Refusals = netlimit.NewRefusals(c.Logger, time.Second, fixedNow)
	})
	for _, path := range []string{"/v1/messages", "/v1/files"} { // accounted, proxied through
		c, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
		require.NoError(t, err)
		defer c.Close()
		_, err = fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{", path)
		require.NoError(t, err)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err, "%s: the slow body is answered, not held", path)
		assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode, path)
		assert.Equal(t, "body_timeout", resp.Header.Get(HeaderGatewayError), path)
	}
	assert.Equal(t, uint64(2), h.gw.Stats().Refusals[netlimit.ReasonBodyTimeout])
	assert.Contains(t, h.logs.String(), `"level":"WARN","msg":"gateway: request refused: the request body did not arrive in time`)

	for i := range 2 { // the second on the first's keep-alive connection
		start := time.Now()
		resp := h.post("/v1/messages", anthropicStreamBody, "X-Api-Key", "k")
		got, err := read(resp)
		require.NoError(t, err, "stream %d", i)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, len(evs), strings.Count(got, "data: "), "every event of stream %d", i)
		assert.Greater(t, time.Since(start), 2*200*time.Millisecond, "stream %d outlasted the timeouts", i)
	}
}

// One client's calls in flight are capped (429 with retry-after past the
// cap), another client's are not held by them. The old gateway had no cap.
func TestCallsPerClientCapped(t *testing.T) {
	g := newGate()
	defer g.release()
	up := startScripted(t, g.step)
	h := newHarness(t, up.srv.URL, func(c *Config) {
		c.Limits.MaxCallsPerClient = 2
		c.Limits.Refusals = netlimit.NewRefusals(c.Logger, time.Second, fixedNow)
	})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			resp := h.post("/v1/messages", anthropicBody, "X-Api-Key", "greedy-key")
			assert.Equal(t, http.StatusOK, resp.StatusCode)
		})
	}
	g.waitArrivals(t, 2)
	for range 3 {
		resp := h.post("/v1/messages", anthropicBody, "X-Api-Key", "greedy-key")
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		assert.Equal(t, "client_calls", resp.Header.Get(HeaderGatewayError))
		assert.Equal(t, "1", resp.Header.Get("Retry-After"))
		body, _ := read(resp)
		assert.Contains(t, body, "rate_limit_error", "in the provider's error format")
	}
	other := make(chan int, 1)
	go func() {
		resp := h.post("/v1/messages", anthropicBody, "X-Api-Key", "other-key")
		other <- resp.StatusCode
	}()
	g.waitArrivals(t, 1)
	g.release()
	assert.Equal(t, http.StatusOK, <-other)
	wg.Wait()
	assert.Equal(t, uint64(3), h.gw.Stats().Refusals[netlimit.ReasonClientCalls])
	logs := h.logs.String()
	assert.Equal(t, 1, strings.Count(logs, `"reason":"client_calls"`))
	assert.Contains(t, logs, `"refused":1`)
	assert.NotContains(t, logs, "greedy-key", "the client is named by a digest")
}

func TestCredentialClientID(t *testing.T) {
	g := &Gateway{mounts: testMounts(t)}
	clientID := func(target string, kv ...string) string {
		r, _ := http.NewRequest("POST", "http://x"+target, nil)
		for i := 0; i+1 < len(kv); i += 2 {
			r.Header.Set(kv[i], kv[i+1])
		}
		tg, ok := g.mounts.resolve(r)
		require.True(t, ok)
		return g.clientOf(client{account: accountOf(nil, r, tg.u)}, r)
	}
	id := clientID("/v1/messages", "X-Api-Key", "a")
	assert.Equal(t, id, clientID("/v1beta/models/m:generateContent?key=a"))
	assert.Equal(t, id, clientID("/gemini/v1beta/models/m:generateContent?key=a"), "at a mount too")
	assert.NotContains(t, id, "a\"")
	assert.Equal(t, "anonymous", clientID("/v1/messages"))
	assert.Equal(t, "key-k", g.clientOf(client{key: &Key{Name: "k"}, account: id}, nil))
}
