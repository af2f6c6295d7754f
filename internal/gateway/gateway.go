package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/netlimit"
	"github.com/agentledger/ledger/internal/pricing"
	"github.com/agentledger/ledger/internal/provider"
	"github.com/agentledger/ledger/internal/retry"
)

// Defaults of Config.
const (
	DefaultSession           = "default"
	DefaultAttemptTimeout    = 10 * time.Minute
	DefaultStreamIdleTimeout = 5 * time.Minute
	DefaultMaxRequestBytes   = 32 << 20
	DefaultMaxResponseBytes  = 64 << 20
)

// maxErrorBody bounds the body of an upstream error response the gateway
// keeps to classify and relay.
const maxErrorBody = 1 << 20

// Config configures a Gateway. Retry.Sink is required; every other zero
// value selects its default.
type Config struct {
	// Providers are the providers the gateway speaks for, each served
	// under /NAME/ and, when its Upstream says AtRoot, at the root too
	// (see the package documentation), read once by New. Nil: the
	// built-in providers (provider.Builtin: those whose package the
	// program links, with internal/provider/builtin).
	Providers *provider.Registry
	// Upstreams maps a provider's name to its origin, in place of the
	// provider's own (Upstream().Origin): scheme, host, port and an
	// optional path prefix, which the request's path (after its mount)
	// is appended to (ParseOrigin). A name that is not one of Providers'
	// is an error.
	Upstreams map[string]string
	// Retry configures the retry middleware the gateway runs every call
	// under: Policy, Breakers (the circuit breakers, one per upstream:
	// provider and model), Sink (required: where the attempt events go),
	// Clock, Logger. The gateway classifies its upstreams' failures
	// itself; Retry.Classifier, when set, sees only what it does not
	// recognise.
	Retry retry.Options
	// Attempts keeps the attempt numbers of the requests clients name
	// (HeaderRequestID, HeaderIdempotencyKey), across replicas with
	// KVAttempts. Nil: a MemoryAttempts, right for a single replica only.
	Attempts AttemptNumbers
	// Keys, when set, are the client keys: every request must present
	// one (401 otherwise), which names the client, may fix or constrain
	// its session, and may hold the provider credentials sent upstream in
	// its place (see the package documentation). Nil: no authentication;
	// the gateway should then listen on loopback only.
	Keys *Keys
	// DefaultSession is the session of a request without
	// HeaderSessionID. Default DefaultSession.
	DefaultSession string
	// Labels are the gateway's default labels: every call's events carry
	// them, under the client key's labels (Key.Labels) and those of the
	// request's HeaderLabels (a key set there wins). They must follow the
	// contract's rules (events.ValidateLabels).
	Labels api.Labels
	// ForwardLedgerHeaders sends HeaderSessionID, HeaderRequestID and
	// HeaderAttempt upstream (for the fake provider's truth). Off, no
	// ledger header reaches the upstream.
	ForwardLedgerHeaders bool
	// AttemptTimeout bounds an attempt until its answer: the whole
	// response of a call that does not stream, the headers and first
	// event of a stream. StreamIdleTimeout bounds the silence between two
	// events of a stream after that.
	AttemptTimeout, StreamIdleTimeout time.Duration
	// MaxRequestBytes bounds a client's request body (413 beyond);
	// MaxResponseBytes an upstream's whole response (when not streamed)
	// and each event of a stream.
	MaxRequestBytes, MaxResponseBytes int64
	// Transport sends the upstream requests; nil: DefaultTransport().
	Transport http.RoundTripper
	// Logger receives the gateway's records; nil discards them.
	Logger *slog.Logger
	// Now is the clock of the Retry-After of a breaker's rejection; nil:
	// time.Now.
	Now func() time.Time
	// Limits are what one client can hold of the gateway: bodies in
	// flight, calls, time.
	Limits Limits
	// Prices, when set, prices the attempt of every answer: its cost in
	// US dollars goes to the client in HeaderCost, a header of an answer
	// that is not streamed and a trailer of a stream (whose headers
	// leave before its usage is known). The ledger prices the same
	// attempt with the catalog it records; the header is for the
	// client's information.
	Prices *pricing.Catalog
}

// DefaultTransport is a transport for the providers: connections kept
// alive and reused (many per host, for a fleet's concurrency), HTTP/2
// where the upstream offers it, the environment's proxy.
func DefaultTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          2048,
		MaxIdleConnsPerHost:   1024,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// Gateway is the HTTP handler of the gateway: it accounts the providers'
// model calls (see the package documentation) and proxies everything else
// through. It is safe for concurrent use and starts no goroutines.
type Gateway struct {
	cfg         Config
	mounts      *mounts
	mw          *retry.Middleware
	maxAttempts int // attempt numbers a call may use: MaxRetries+1
	attempts    AttemptNumbers
	transport   http.RoundTripper
	log         *slog.Logger
	proxy       *httputil.ReverseProxy
	unaccounted onceSet // paths logged as not accounted
	noUsage     onceSet // APIs logged as answering without usage
	models      boundedSet
	accounts    boundedSet

	budget              *netlimit.Budget
	perClient           *netlimit.PerKey
	refusals            *netlimit.Refusals
	estimates           chan struct{} // a slot per running estimate, Limits.MaxEstimates
	requests, accounted atomic.Uint64
}

// New validates cfg and returns a Gateway.
func New(cfg Config) (*Gateway, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	g := &Gateway{cfg: cfg, attempts: cfg.Attempts, transport: cfg.Transport, log: cfg.Logger}
	var err error
	if g.mounts, err = newMounts(cfg.Providers, cfg.Upstreams); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	if err := cfg.Keys.check(cfg.Providers); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	ro := cfg.Retry
	if ro.Policy == (retry.Policy{}) {
		ro.Policy = retry.DefaultPolicy()
	}
	// The gateway bounds its attempts itself, event by event
	// (AttemptTimeout, StreamIdleTimeout): the policy's would cut a stream
	// longer than its attempt timeout.
	ro.Policy.AttemptTimeout, ro.Policy.StreamIdleTimeout = 0, 0
	ro.Sink = trackingSink{next: cfg.Retry.Sink}
	ro.Classifier = retry.Chain{classifier{}, cfg.Retry.Classifier}
	if ro.RateLimits == nil {
		ro.RateLimits = g.rateLimits
	}
	mw, err := retry.New(ro)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	g.mw, g.maxAttempts = mw, mw.Policy().MaxRetries+1
	g.models = boundedSet{max: maxBreakerModels, set: make(map[string]struct{})}
	g.accounts = boundedSet{max: maxAccounts, set: make(map[string]struct{})}
	g.proxy = g.newProxy()
	g.refusals = cfg.Limits.Refusals
	if g.budget, err = netlimit.NewBudget(cfg.Limits.MaxBodyBytesInFlight); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	if g.perClient, err = netlimit.NewPerKey(cfg.Limits.MaxCallsPerClient); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	g.estimates = make(chan struct{}, cfg.Limits.MaxEstimates)
	return g, nil
}

func (c *Config) defaults() error {
	if c.Retry.Sink == nil {
		return errors.New("gateway: Retry.Sink is nil; it is required")
	}
	if c.Providers == nil {
		c.Providers = provider.Builtin()
	}
	if c.Attempts == nil {
		c.Attempts = NewMemoryAttempts()
	}
	if c.DefaultSession == "" {
		c.DefaultSession = DefaultSession
	}
	if err := events.ValidateID("default session", c.DefaultSession); err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	if err := events.ValidateLabels(c.Labels); err != nil {
		return fmt.Errorf("gateway: Labels: %w", err)
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{{"AttemptTimeout", &c.AttemptTimeout, DefaultAttemptTimeout}, {"StreamIdleTimeout", &c.StreamIdleTimeout, DefaultStreamIdleTimeout}} {
		if *d.v == 0 {
			*d.v = d.def
		}
		if *d.v < 0 {
			return fmt.Errorf("gateway: %s is %s; it must be positive", d.name, *d.v)
		}
	}
	for _, n := range []struct {
		name string
		v    *int64
		def  int64
	}{{"MaxRequestBytes", &c.MaxRequestBytes, DefaultMaxRequestBytes}, {"MaxResponseBytes", &c.MaxResponseBytes, DefaultMaxResponseBytes}} {
		if *n.v == 0 {
			*n.v = n.def
		}
		if *n.v < 0 {
			return fmt.Errorf("gateway: %s is %d; it must be positive", n.name, *n.v)
		}
	}
	if c.Transport == nil {
		c.Transport = DefaultTransport()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if err := c.Limits.defaults(c.Logger); err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	return nil
}

// ParseOrigin parses an upstream's origin: http or https, a host, an
// optional path prefix (the request's path after its mount is appended
// to it: "http://127.0.0.1:9090/openai" sends /v1/chat/completions to
// /openai/v1/chat/completions), and no query, fragment or credentials.
// A trailing "/" is dropped.
func ParseOrigin(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%q is not a URL: %w", s, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%q: the scheme must be http or https", s)
	case u.Host == "":
		return nil, fmt.Errorf("%q has no host", s)
	case u.RawQuery != "", u.ForceQuery, u.Fragment != "":
		return nil, fmt.Errorf("%q must be an origin with an optional path prefix: no query or fragment", s)
	case u.User != nil:
		return nil, fmt.Errorf("%q must not carry credentials: the client's credential headers are passed through", s)
	}
	u.Path, u.RawPath = strings.TrimRight(u.Path, "/"), strings.TrimRight(u.RawPath, "/")
	return u, nil
}

// rateLimits is the reader of the rate-limit headers of the provider
// named name, for the retry middleware's guards.
func (g *Gateway) rateLimits(name string) guard.RateLimitParser {
	if u := g.mounts.byName[name]; u != nil {
		return u.p
	}
	return nil
}

// Middleware returns the retry middleware the gateway runs calls under,
// for its Stats.
func (g *Gateway) Middleware() *retry.Middleware { return g.mw }

// ServeHTTP accounts the providers' model calls and proxies everything
// else through.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t, ok := g.mounts.resolve(r)
	if !ok {
		g.requests.Add(1)
		why := "no provider at the gateway's root takes this request, and it names no mount: use /NAME/... for NAME in " + strings.Join(g.cfg.Providers.Names(), ", ")
		g.logRefusal(r, "no_route", why)
		w.Header().Set(HeaderGatewayError, "no_route")
		http.Error(w, why, http.StatusNotFound)
		return
	}
	sec := g.mounts.secretsOf(r)
	cl, ok := g.authenticate(w, r, t.u, &sec)
	if !ok {
		g.requests.Add(1)
		return
	}
	clientID := g.clientOf(cl, r)
	if !t.accounted {
		g.limit(w, r.WithContext(context.WithValue(r.Context(), targetKey{}, &t)), t.u, clientID, g.passthrough)
		return
	}
	g.accounted.Add(1)
	g.limit(w, r, t.u, clientID, func(w http.ResponseWriter, r *http.Request) {
		c := &call{g: g, t: t, w: w, r: r, secrets: sec, client: cl}
		c.serve()
	})
}

// targetKey is the context key of a passthrough request's target,
// resolved before the client key was taken out of it.
type targetKey struct{}

// maxBreakerModels bounds the models that get a breaker of their own
// (clients name models, so the set is theirs to grow): past it, a
// provider's other models share one.
const maxBreakerModels = 1024

// breakerKey is the key of a call's breaker: "" (the middleware's
// provider/model) for the first maxBreakerModels models seen, else the
// provider's shared one.
func (g *Gateway) breakerKey(provider, model string) string {
	if g.models.add(provider + "/" + model) {
		return ""
	}
	return provider + "/(other models)"
}

// boundedSet is a set of strings that stops growing at max.
type boundedSet struct {
	mu  sync.RWMutex
	max int
	set map[string]struct{}
}

// add reports whether s is in the set, adding it when there is room.
func (b *boundedSet) add(s string) bool {
	b.mu.RLock()
	_, ok := b.set[s]
	full := len(b.set) >= b.max
	b.mu.RUnlock()
	if ok || full {
		return ok
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.set) >= b.max {
		_, ok = b.set[s]
		return ok
	}
	b.set[s] = struct{}{}
	return true
}

// onceSet remembers what was logged, up to a bound, so that a record is
// written once per key.
type onceSet struct {
	mu   sync.Mutex
	seen map[string]bool
}

// maxOnce bounds an onceSet: past it, nothing more is logged.
const maxOnce = 1000

// first reports whether key is new (and there is room to remember it);
// full reports the one time the set fills up.
func (o *onceSet) first(key string) (first, full bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen == nil {
		o.seen = make(map[string]bool)
	}
	if o.seen[key] || len(o.seen) > maxOnce {
		return false, false
	}
	o.seen[key] = true
	return true, len(o.seen) > maxOnce
}

// release gives back the attempt numbers a call reserved and did not use,
// with a context of its own: the client may be gone.
func (g *Gateway) release(ctx context.Context, requestID string, res Reservation, used int) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := g.attempts.Release(ctx, requestID, res, used); err != nil {
		g.log.LogAttrs(ctx, slog.LevelWarn, "gateway: could not give back unused attempt numbers; the request's numbering keeps a gap",
			slog.String("request_id", requestID), slog.Any("error", err))
	}
}
