package fakeprovider

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentledger/ledger/internal/events"
)

// Headers by which a client names the logical call and attempt of a
// request: the session and request IDs follow events.IDRule, the attempt is
// the contract's attempt number (0 for the first). The server answers a
// request without them 400.
const (
	HeaderSessionID = "X-Ledger-Session-Id"
	HeaderRequestID = "X-Ledger-Request-Id"
	HeaderAttempt   = "X-Ledger-Attempt"
)

// Options configure a Server.
type Options struct {
	// Seed makes every decision of the server; the same seed, mix and
	// requests give the same answers and the same truth.
	Seed uint64
	// Mix is the fault mix. The zero value injects no faults.
	Mix Mix
	// Script, when set, replaces the seed and the mix: the server answers
	// the n-th request it receives with Script[n], whatever it asks, and
	// requests need no ledger headers. Requests past the end are answered
	// 500 and counted (Unscripted).
	Script []Step
	// Tier are the organizations' rate limits (tier.go); the zero value
	// has none.
	Tier Tier
	// Outage is a window of 503s (tier.go); the zero value has none.
	Outage Outage
	// Now is the clock of the tier and the outage; nil selects time.Now.
	Now func() time.Time
}

// Server is the fake provider: an HTTP server on 127.0.0.1 with a random
// port, serving every provider under its own path prefix (see BaseURL). It
// is safe for concurrent use; Close stops it.
type Server struct {
	plan     Plan
	script   *script
	requests atomic.Int64
	ts       *httptest.Server
	ledger   *ledger

	stop      chan struct{} // closed by Close; releases stalled handlers
	closeOnce sync.Once
	limits    *limiter // nil without a tier or an outage
}

// New validates the options and starts a server on a random loopback
// port, serving each provider under its prefix (see BaseURL).
func New(opts Options) (*Server, error) {
	return listen("127.0.0.1:0", opts, false)
}

// listen validates the options and starts a server on addr; root adds the
// providers' own paths (see Listen).
func listen(addr string, opts Options, root bool) (*Server, error) {
	if err := opts.Mix.Validate(); err != nil {
		return nil, err
	}
	if err := validateLimits(opts.Tier, opts.Outage); err != nil {
		return nil, err
	}
	var sc *script
	if opts.Script != nil {
		sc = &script{steps: opts.Script}
		if err := sc.validate(); err != nil {
			return nil, err
		}
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("fakeprovider: listen: %w", err)
	}
	s := &Server{
		plan:   Plan{Seed: opts.Seed, Mix: opts.Mix},
		script: sc,
		ledger: newLedger(),
		stop:   make(chan struct{}),
	}
	if opts.Tier != (Tier{}) || opts.Outage != (Outage{}) {
		s.limits = newLimiter(opts.Tier, opts.Outage, opts.Now)
	}
	mux := http.NewServeMux()
	counted := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { s.requests.Add(1); h(w, r) }
	}
	mux.HandleFunc("POST /anthropic/v1/messages", counted(s.anthropicMessages))
	mux.HandleFunc("POST /openai/v1/chat/completions", counted(s.openaiChatCompletions))
	mux.HandleFunc("POST /gemini/v1beta/models/", counted(s.geminiModels))
	mux.HandleFunc("POST /openai/v1/responses", counted(s.openaiResponses))
	mux.HandleFunc("POST /openai/v1/embeddings", counted(s.openaiEmbeddings))
	if root {
		s.rootRoutes(mux, counted)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "fakeprovider: no such endpoint: "+r.Method+" "+r.URL.Path, http.StatusNotFound)
	})
	s.ts = &httptest.Server{Listener: l, Config: &http.Server{Handler: mux}}
	s.ts.Start()
	return s, nil
}

// URL is the server's root, http://127.0.0.1:port.
func (s *Server) URL() string { return s.ts.URL }

// BaseURL is the base URL to give the provider's SDK client: for Anthropic
// (option.WithBaseURL) URL()/anthropic/, for OpenAI (option.WithBaseURL)
// URL()/openai/v1/, for Gemini (HTTPOptions.BaseURL, API version v1beta)
// URL()/gemini/. It returns "" for a provider the server does not speak.
func (s *Server) BaseURL(provider string) string { return BaseURLOf(s.ts.URL, provider) }

// BaseURLOf is BaseURL for a server whose URL is root, served by another
// process (publisher simulate --processes).
func BaseURLOf(root, provider string) string {
	switch provider {
	case Anthropic:
		return root + "/anthropic/"
	case OpenAI:
		return root + "/openai/v1/"
	case Gemini:
		return root + "/gemini/"
	}
	return ""
}

// Plan is the server's decision function, for tests that want to know in
// advance what a call will get.
func (s *Server) Plan() Plan { return s.plan }

// Truth returns a copy of the ground truth so far. After Close it is
// final: Close waits for every handler.
func (s *Server) Truth() *Truth { return s.ledger.snapshot(s.plan) }

// Close releases stalled requests, shuts the server down and waits for
// its handlers to return. It is safe to call more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.stop)
		s.ts.CloseClientConnections()
		s.ts.Close()
	})
}

// identifyRequest reads the ledger headers; a scripted server takes
// requests without them too.
func (s *Server) identifyRequest(r *http.Request) (callID, error) {
	if s.script != nil {
		return scriptedCall(r, int(s.script.next.Load())), nil
	}
	return identify(r)
}

// identify reads the ledger headers.
func identify(r *http.Request) (callID, error) {
	c := callID{SessionID: r.Header.Get(HeaderSessionID), RequestID: r.Header.Get(HeaderRequestID)}
	if err := events.ValidateID(HeaderSessionID, c.SessionID); err != nil {
		return c, err
	}
	if err := events.ValidateID(HeaderRequestID, c.RequestID); err != nil {
		return c, err
	}
	v := r.Header.Get(HeaderAttempt)
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > events.MaxAttempt {
		return c, fmt.Errorf("%s: %q must be an integer from 0 to %d", HeaderAttempt, v, events.MaxAttempt)
	}
	c.Attempt = n
	return c, nil
}

// stall blocks until the client gives up or the server closes.
func (s *Server) stall(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-s.stop:
	}
}

// providerRequestID is the provider's request id of an attempt.
func providerRequestID(prefix string, c callID) string {
	h := fnv.New64a()
	h.Write([]byte(c.RequestID))
	return fmt.Sprintf("%s%016x%02x", prefix, h.Sum64(), c.Attempt%256)
}

// decodeBody reads a JSON request body into dst.
func decodeBody(w http.ResponseWriter, r *http.Request, dst any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<20))
	if err := dec.Decode(dst); err != nil {
		return fmt.Errorf("request body: %w", err)
	}
	return nil
}

// writeJSON answers with a JSON body.
func writeJSON(w http.ResponseWriter, status int, body any) {
	b, err := json.Marshal(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// sse writes a server-sent event stream.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func startSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w, rc: http.NewResponseController(w)}
}

// send writes one event (name may be empty) and flushes it.
func (s *sse) send(name string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	var sb strings.Builder
	if name != "" {
		sb.WriteString("event: ")
		sb.WriteString(name)
		sb.WriteString("\n")
	}
	sb.WriteString("data: ")
	sb.Write(b)
	sb.WriteString("\n\n")
	if _, err := s.w.Write([]byte(sb.String())); err != nil {
		return err
	}
	return s.rc.Flush()
}

// sendRaw writes one unnamed event whose data is given as it is.
func (s *sse) sendRaw(data string) error {
	if _, err := s.w.Write([]byte("data: " + data + "\n\n")); err != nil {
		return err
	}
	return s.rc.Flush()
}

// reply is the provider-specific part of answering one attempt.
type reply interface {
	// fail answers a fault other than a stall.
	fail(w http.ResponseWriter, c callID, d Decision)
	// succeed answers the attempt with the call's usage.
	succeed(w http.ResponseWriter, c callID, u events.Usage) error
	// startStall begins a streamed answer that reports the billed usage u,
	// before the server stalls.
	startStall(w http.ResponseWriter, c callID, u events.Usage) error
	// streamError ends a streamed answer begun by startStall with an error
	// event of a server error.
	streamError(w http.ResponseWriter) error
}

// serve is the common flow of every endpoint once the provider's request
// was decoded: identify, decide, book, answer.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, c callID, provider, model string, stream bool, maxOutput int64, rep reply) {
	if r.Context().Err() != nil {
		// The client gave up before the request was handled: nothing is
		// generated, nothing billed.
		s.ledger.recordAbandoned()
		return
	}
	if s.gate(w, c, provider, model, s.costOf(c, provider, maxOutput), rep) {
		return
	}
	d, usage, ok := s.decide(c, provider)
	if !ok {
		unscripted(w, s.script.over.Load())
		return
	}
	if s.script == nil && maxOutput > 0 && usage.OutputTokens > maxOutput {
		usage.OutputTokens = maxOutput
	}
	if a, ok := rep.(usageShaper); ok && s.script == nil {
		usage = a.shape(usage)
	}
	switch d.Fault {
	case FaultNone:
		s.ledger.record(c, provider, model, FaultNone, usage)
		_ = rep.succeed(w, c, usage)
	case FaultBilledTimeout:
		if !stream {
			s.ledger.record(c, provider, model, FaultTimeout, events.Usage{})
			s.stall(r)
			return
		}
		billed := usage
		billed.OutputTokens = StalledOutputTokens
		if s.script != nil {
			billed = usage // as scripted
		}
		s.recordStream(c, provider, model, FaultBilledTimeout, billed, rep)
		if rep.startStall(w, c, billed) == nil {
			s.stall(r)
		}
	case FaultBilledError:
		if !stream {
			// The 500 carries no usage: nothing of it is observable.
			s.ledger.recordPartly(c, provider, model, FaultBilledError, usage, usage)
			rep.fail(w, c, Decision{Fault: FaultServerError})
			return
		}
		s.recordStream(c, provider, model, FaultBilledError, usage, rep)
		if rep.startStall(w, c, usage) == nil {
			_ = rep.streamError(w)
		}
	case FaultBrokenStream:
		s.breakStream(w, c, provider, model, stream, usage, rep)
	default:
		s.ledger.record(c, provider, model, d.Fault, events.Usage{})
		rep.fail(w, c, d)
	}
}

// retryAfterHeaders sets the hint headers of a rate limit.
func retryAfterHeaders(w http.ResponseWriter, d Decision) {
	ms := d.RetryAfter.Milliseconds()
	w.Header().Set("retry-after-ms", strconv.FormatInt(ms, 10))
	w.Header().Set("retry-after", strconv.FormatFloat(d.RetryAfter.Seconds(), 'f', 3, 64))
}
