package gateway

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/provider"
	_ "github.com/agentledger/ledger/internal/provider/builtin"
	"github.com/agentledger/ledger/internal/retry"
	"github.com/agentledger/ledger/internal/testkit"
)

// The built-in providers' names, as the events record them.
const (
	anthropic = "anthropic"
	openai    = "openai"
	gemini    = "gemini"
)

// testMounts are the mounts of the built-in providers at their own
// origins.
func testMounts(t testing.TB) *mounts {
	t.Helper()
	m, err := newMounts(provider.Builtin(), nil)
	require.NoError(t, err)
	return m
}

// testPolicy retries twice, quickly.
func testPolicy() retry.Policy {
	return retry.Policy{MaxRetries: 2, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond, HintCap: time.Second}
}

// harness is a gateway in front of one upstream (every provider's origin)
// with an in-memory sink and a debug log.
type harness struct {
	t    testing.TB
	gw   *Gateway
	url  string // the gateway's
	sink *retry.MemorySink
	logs *testkit.Logs
}

// newHarness starts a gateway whose every upstream is origin; mod may
// change the config.
func newHarness(t testing.TB, origin string, mod func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, sink: retry.NewMemorySink(), logs: &testkit.Logs{}}
	group, err := breaker.NewGroup(breaker.Config{FailureThreshold: 1000})
	require.NoError(t, err)
	cfg := Config{
		Upstreams:         map[string]string{anthropic: origin, openai: origin, gemini: origin},
		Retry:             retry.Options{Policy: testPolicy(), Sink: h.sink, Breakers: group},
		AttemptTimeout:    2 * time.Second,
		StreamIdleTimeout: 2 * time.Second,
		Logger:            h.logs.JSONLogger(slog.LevelDebug),
	}
	if mod != nil {
		mod(&cfg)
	}
	h.gw, err = New(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(h.gw)
	t.Cleanup(srv.Close)
	h.url = srv.URL
	return h
}

// post sends body to path with the headers given as name, value pairs.
func (h *harness) post(path, body string, kv ...string) *http.Response {
	h.t.Helper()
	return h.postLines(path, body, nil, kv...)
}

// postLines is post with each of lines as its own X-Ledger-Labels line.
func (h *harness) postLines(path, body string, lines []string, kv ...string) *http.Response {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.url+path, strings.NewReader(body))
	require.NoError(h.t, err)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Set(kv[i], kv[i+1])
	}
	for _, l := range lines {
		req.Header.Add(HeaderLabels, l)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(h.t, err)
	h.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// read returns the whole body of resp, and the error that ended it.
func read(resp *http.Response) (string, error) {
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// events returns the sink's events, each checked against the contract.
func (h *harness) events() []events.Attempt {
	h.t.Helper()
	evs := h.sink.Events()
	for i := range evs {
		require.NoError(h.t, evs[i].Validate(), "event %d", i)
	}
	return evs
}

// step is one scripted upstream answer.
type step func(w http.ResponseWriter, r *http.Request)

// scripted is an upstream that answers its n-th request with steps[n]
// (the last step repeats), recording the requests.
type scripted struct {
	mu    sync.Mutex
	steps []step
	reqs  []*http.Request
	srv   *httptest.Server
}

func startScripted(t *testing.T, steps ...step) *scripted {
	t.Helper()
	s := &scripted{steps: steps}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.mu.Lock()
		n := len(s.reqs)
		cl := r.Clone(r.Context())
		cl.Body = io.NopCloser(bytes.NewReader(body))
		s.reqs = append(s.reqs, cl)
		st := s.steps[min(n, len(s.steps)-1)]
		s.mu.Unlock()
		st(w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *scripted) requests() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*http.Request(nil), s.reqs...)
}

// reply answers status with body (JSON) and the headers given as pairs.
func reply(status int, body string, kv ...string) step {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		for i := 0; i+1 < len(kv); i += 2 {
			w.Header().Set(kv[i], kv[i+1])
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// sse streams the events (each a whole "event:/data:" block without its
// blank line), flushing each; cut then closes the connection without the
// end of the response.
func sse(cut bool, evs ...string) step { return pacedSSE(0, cut, evs...) }

// pacedSSE is sse with pace between two events (the stream's own pace,
// not a wait for a condition).
func pacedSSE(pace time.Duration, cut bool, evs ...string) step {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		for i, e := range evs {
			if i > 0 && pace > 0 {
				time.Sleep(pace)
			}
			_, _ = io.WriteString(w, e+"\n\n")
			_ = rc.Flush()
		}
		if cut {
			panic(http.ErrAbortHandler)
		}
	}
}

const (
	anthropicBody       = `{"model":"claude-test","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`
	anthropicStreamBody = `{"model":"claude-test","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	anthropicOK         = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"hello"}],"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":5,"cache_read_input_tokens":90,"cache_creation_input_tokens":0}}`
	overloaded          = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
	evStart             = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{\"input_tokens\":20,\"output_tokens\":1,\"cache_read_input_tokens\":100}}}"
	evDelta             = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}"
	evMsgDelta          = "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":42}}"
	evStop              = "event: message_stop\ndata: {\"type\":\"message_stop\"}"
	evOverloaded        = "event: error\ndata: " + overloaded
)

func usage(in, out, read, create int64) events.Usage {
	return events.Usage{InputTokens: in, OutputTokens: out, CacheReadInputTokens: read, CacheCreationInputTokens: create}
}
