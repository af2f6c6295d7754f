package fakeprovider

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/provider/fakekit"
)

// Headers by which a client names the logical call and attempt of a
// request (see fakekit): the server answers a request without them 400.
const (
	HeaderSessionID = fakekit.HeaderSessionID
	HeaderRequestID = fakekit.HeaderRequestID
	HeaderAttempt   = fakekit.HeaderAttempt
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
	// Dialects are the providers the server speaks; nil selects
	// Dialects(), those of the built-in providers. Their names and
	// prefixes must be distinct.
	Dialects []*fakekit.Dialect
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
	dialects map[string]*fakekit.Dialect

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
	dialects := opts.Dialects
	if dialects == nil {
		dialects = Dialects()
	}
	byName, err := checkDialects(dialects)
	if err != nil {
		return nil, err
	}
	s := &Server{
		plan:     Plan{Seed: opts.Seed, Mix: opts.Mix},
		script:   sc,
		ledger:   newLedger(),
		dialects: byName,
		stop:     make(chan struct{}),
	}
	if opts.Tier != (Tier{}) || opts.Outage != (Outage{}) {
		s.limits = newLimiter(opts.Tier, opts.Outage, opts.Now)
	}
	mux := s.routes(dialects, root)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("fakeprovider: listen: %w", err)
	}
	s.ts = &httptest.Server{Listener: l, Config: &http.Server{Handler: mux}}
	s.ts.Start()
	return s, nil
}

// checkDialects validates the dialects and indexes them by provider.
func checkDialects(ds []*fakekit.Dialect) (map[string]*fakekit.Dialect, error) {
	if len(ds) == 0 {
		return nil, fmt.Errorf("%w: no dialect to speak (the program links no provider with a fake dialect)", ErrInvalidOptions)
	}
	byName := make(map[string]*fakekit.Dialect, len(ds))
	prefixes := make(map[string]string, len(ds))
	for i, d := range ds {
		if d == nil {
			return nil, fmt.Errorf("%w: Dialects[%d] is nil", ErrInvalidOptions, i)
		}
		if err := d.Validate(); err != nil {
			return nil, fmt.Errorf("%w: Dialects[%d]: %w", ErrInvalidOptions, i, err)
		}
		if _, ok := byName[d.Provider]; ok {
			return nil, fmt.Errorf("%w: Dialects[%d]: provider %q is spoken twice", ErrInvalidOptions, i, d.Provider)
		}
		if other, ok := prefixes[d.Prefix]; ok {
			return nil, fmt.Errorf("%w: Dialects[%d]: prefix %q of %q is %q's", ErrInvalidOptions, i, d.Prefix, d.Provider, other)
		}
		byName[d.Provider], prefixes[d.Prefix] = d, d.Provider
	}
	return byName, nil
}

// routes serves every dialect's endpoints under its prefix and, with
// root, at the API's own paths too: the first dialect to claim a path has
// it (a compatible provider's paths are its model's).
func (s *Server) routes(ds []*fakekit.Dialect, root bool) *http.ServeMux {
	mux := http.NewServeMux()
	claimed := make(map[string]bool)
	for _, d := range ds {
		x := &exchange{s: s, d: d}
		for _, e := range d.Endpoints {
			h := s.counted(func(w http.ResponseWriter, r *http.Request) { e.Handle(x, w, r) })
			mux.Handle("POST "+d.Prefix+e.Path, http.StripPrefix(d.Prefix, h))
			if root && !claimed[e.Path] {
				claimed[e.Path] = true
				mux.Handle("POST "+e.Path, h)
			}
		}
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "fakeprovider: no such endpoint: "+r.Method+" "+r.URL.Path, http.StatusNotFound)
	})
	return mux
}

// counted counts the requests h receives.
func (s *Server) counted(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { s.requests.Add(1); h(w, r) }
}

// URL is the server's root, http://127.0.0.1:port.
func (s *Server) URL() string { return s.ts.URL }

// BaseURL is the base URL to give the provider's SDK client (see
// fakekit.Dialect.BaseURL): URL()/anthropic/ for Anthropic, for OpenAI
// URL()/openai/v1/, for Gemini (API version v1beta) URL()/gemini/. It
// returns "" for a provider the server does not speak.
func (s *Server) BaseURL(provider string) string {
	d, ok := s.dialects[provider]
	if !ok {
		return ""
	}
	return d.BaseURL(s.ts.URL)
}

// Plan is the server's decision function, for tests that want to know in
// advance what a call will get.
func (s *Server) Plan() Plan { return s.plan }

// PlannedUsage is the usage the plan gives every successful attempt of
// call requestID to provider (see Plan.Usage), with the subsets its
// dialect reports (fakekit.Dialect.Subsets), before an endpoint's shaping
// (an embedding's has no output) and the request's output cap.
func (s *Server) PlannedUsage(provider, requestID string) events.Usage {
	d := s.dialects[provider]
	if d == nil {
		return s.plan.Usage(requestID, false)
	}
	return d.Subsets(requestID, s.plan.Usage(requestID, d.CacheWrites))
}

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

// exchange is the server as one dialect's handlers see it
// (fakekit.Server): what it books, it books under the dialect's provider.
type exchange struct {
	s *Server
	d *fakekit.Dialect
}

// Identify reads the ledger headers; a scripted server takes requests
// without them too.
func (x *exchange) Identify(r *http.Request) (callID, error) {
	if x.s.script != nil {
		return scriptedCall(r, int(x.s.script.next.Load())), nil
	}
	return identify(r)
}

func (x *exchange) Unidentified() { x.s.ledger.recordUnidentified() }

func (x *exchange) Invalid(c callID, model string) {
	x.s.ledger.record(c, x.d.Provider, model, FaultInvalid, events.Usage{})
}

// Serve is the common flow of every endpoint once the provider's request
// was decoded: decide, book, answer.
func (x *exchange) Serve(w http.ResponseWriter, r *http.Request, c callID, a fakekit.Attempt) {
	s, provider, model, rep := x.s, x.d.Provider, a.Model, a.Reply
	if r.Context().Err() != nil {
		// The client gave up before the request was handled: nothing is
		// generated, nothing billed.
		s.ledger.recordAbandoned()
		return
	}
	if s.gate(w, c, x.d, model, s.costOf(c, x.d, a.MaxOutput), rep) {
		return
	}
	d, usage, ok := s.decide(c, x.d)
	if !ok {
		unscripted(w, s.script.over.Load())
		return
	}
	if s.script == nil && a.MaxOutput > 0 && usage.OutputTokens > a.MaxOutput {
		usage.OutputTokens = a.MaxOutput
	}
	if sh, ok := rep.(fakekit.Shaper); ok && s.script == nil {
		usage = sh.Shape(usage)
	}
	switch d.Fault {
	case FaultNone:
		if s.script == nil {
			usage = x.d.Subsets(c.RequestID, usage)
		}
		s.ledger.record(c, provider, model, FaultNone, usage)
		_ = rep.Succeed(w, c, usage)
	case FaultBilledTimeout:
		if !a.Stream {
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
		if rep.StartStall(w, c, billed) == nil {
			s.stall(r)
		}
	case FaultBilledError:
		if !a.Stream {
			// The 500 carries no usage: nothing of it is observable.
			s.ledger.recordPartly(c, provider, model, FaultBilledError, usage, usage)
			rep.Fail(w, c, Decision{Fault: FaultServerError})
			return
		}
		s.recordStream(c, provider, model, FaultBilledError, usage, rep)
		if rep.StartStall(w, c, usage) == nil {
			_ = rep.StreamError(w)
		}
	case FaultBrokenStream:
		s.breakStream(w, c, provider, model, a.Stream, usage, rep)
	default:
		s.ledger.record(c, provider, model, d.Fault, events.Usage{})
		rep.Fail(w, c, d)
	}
}
