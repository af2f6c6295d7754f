package gateway

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentledger/ledger"
	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/events"
	internal "github.com/agentledger/ledger/internal/gateway"
	"github.com/agentledger/ledger/internal/provider"

	"github.com/agentledger/ledger/internal/provider/openai"
	"github.com/agentledger/ledger/internal/retry"
)

// Option configures New. Each validates its argument: New returns an
// error wrapping ledger.ErrInvalidOption that names the option and the
// rule.
type Option func(*options) error

type options struct {
	conn      *ledger.Conn // WithNATS
	natsURL   string       // WithNATSURL
	connOpts  []ledger.ConnectOption
	pub       *ledger.Publisher // WithPublisher
	upstreams map[string]string
	compat    []provider.Provider // WithOpenAICompatible
	keysFile  string
	insecure  bool
	policy    *retry.Policy
	limits    Limits
	session   string
	labels    ledger.Labels
	log       *slog.Logger
	tracer    trace.TracerProvider
	meter     metric.MeterProvider
}

func invalid(option, format string, args ...any) error {
	return fmt.Errorf("%w: gateway.%s: %s", ledger.ErrInvalidOption, option, fmt.Sprintf(format, args...))
}

// WithNATS publishes the attempt events on conn, with a publisher the
// Gateway owns and drains at Close, and keeps the attempt numbers of the
// requests clients name in the KV bucket ledger_gateway_attempts (created
// when missing), shared by every replica on the same NATS. The stream
// LEDGER_ATTEMPTS must exist (the aggregator creates it; else give
// WithPublisher a publisher made with ledger.WithCreateStream). The
// caller keeps conn and closes it after Close.
func WithNATS(conn *ledger.Conn) Option {
	return func(o *options) error {
		if conn == nil {
			return invalid("WithNATS", "conn must not be nil")
		}
		o.conn = conn
		return nil
	}
}

// WithNATSURL is WithNATS on a connection the Gateway makes to url (with
// ledger.Connect and opts: creds, TLS, ...) and closes at Close.
func WithNATSURL(url string, opts ...ledger.ConnectOption) Option {
	return func(o *options) error {
		if url == "" {
			return invalid("WithNATSURL", "url must not be empty")
		}
		o.natsURL, o.connOpts = url, opts
		return nil
	}
}

// WithPublisher publishes the attempt events with pub, which the caller
// owns: Close flushes it, and the caller closes it after. Without
// WithNATS the attempt numbers of the requests clients name are kept in
// memory, right for a single gateway only; with it, pub publishes and
// conn keeps the numbers.
func WithPublisher(pub *ledger.Publisher) Option {
	return func(o *options) error {
		if pub == nil {
			return invalid("WithPublisher", "publisher must not be nil")
		}
		o.pub = pub
		return nil
	}
}

// WithUpstream sends the calls of provider (its name, e.g. anthropic.Name,
// openai.Name, gemini.Name) to origin: http or https, a host and a port,
// an optional path prefix, no query or credentials. The request's path
// (after the provider's mount /NAME, when it came that way) is appended to
// the prefix: with origin http://127.0.0.1:9090/openai, a call to
// /v1/chat/completions goes to /openai/v1/chat/completions. Default: the
// provider's public endpoint. New refuses a provider the gateway does not
// speak for, naming the ones it does.
func WithUpstream(provider, origin string) Option {
	return func(o *options) error {
		if provider == "" {
			return invalid("WithUpstream", "provider must not be empty")
		}
		if _, err := internal.ParseOrigin(origin); err != nil {
			return invalid("WithUpstream", "origin of %s: %v", provider, err)
		}
		if o.upstreams == nil {
			o.upstreams = make(map[string]string)
		}
		o.upstreams[provider] = origin
		return nil
	}
}

// WithOpenAICompatible mounts an API in OpenAI's dialect at /NAME/ (its
// clients use http://GATEWAY/NAME/v1) and records its calls under
// provider name. preset names the rules that apply (origin, endpoints,
// rate-limit headers, errors: "mistral", "groq", "deepseek", "together",
// "openrouter", "vllm", "ollama"); "" applies OpenAI's, and then origin
// is required. origin is the API's origin without the /v1 its clients'
// paths carry ("http://10.0.0.5:8000"); "" takes the preset's. It is
// cmd/gateway's --upstream NAME=PRESET,URL.
func WithOpenAICompatible(name, preset, origin string) Option {
	return func(o *options) error {
		p, err := openai.Compatible(name, openai.Config{Preset: preset, Origin: origin})
		if err != nil {
			return invalid("WithOpenAICompatible", "%v", err)
		}
		for _, q := range o.compat {
			if q.Name() == name {
				return invalid("WithOpenAICompatible", "%q is mounted twice", name)
			}
		}
		o.compat = append(o.compat, p)
		return nil
	}
}

// WithKeysFile requires a client key of the file at path (the JSON of
// cmd/gateway's --keys; "gateway key new NAME" makes a key) on every
// request: 401 without one. A key names the client, may fix or constrain
// its session, and may hold the provider credentials sent upstream in
// its place (read from the environment when the file says "env").
func WithKeysFile(path string) Option {
	return func(o *options) error {
		if path == "" {
			return invalid("WithKeysFile", "path must not be empty")
		}
		o.keysFile = path
		return nil
	}
}

// WithInsecureNoAuth lets Serve serve an address beyond loopback without
// client keys: anyone who reaches it can spend the credentials it
// forwards and write to the ledger. Not with WithKeysFile.
func WithInsecureNoAuth() Option {
	return func(o *options) error {
		o.insecure = true
		return nil
	}
}

// WithRetryPolicy sets the retries of every call (default
// ledger.DefaultPolicy()). Its AttemptTimeout bounds an attempt until its
// answer (a stream's first event) and its StreamIdleTimeout a stream's
// silence after that; the gateway always bounds both, so 0 selects its
// defaults (10 min and 5 min).
func WithRetryPolicy(p ledger.Policy) Option {
	return func(o *options) error {
		rp := p
		if err := rp.Validate(); err != nil {
			if pe := (*api.PolicyError)(nil); errors.As(err, &pe) {
				return invalid("WithRetryPolicy", "%s %s", pe.Field, pe.Rule)
			}
			return invalid("WithRetryPolicy", "%v", err)
		}
		o.policy = &rp
		return nil
	}
}

// WithLimits sets what one client can hold of the gateway (see Limits);
// its zero fields keep their defaults.
func WithLimits(l Limits) Option {
	return func(o *options) error {
		if err := l.validate(); err != nil {
			return invalid("WithLimits", "%v", err)
		}
		o.limits = l
		return nil
	}
}

// WithDefaultSession is the session of a request without the header
// X-Ledger-Session-Id (default "default"); it follows the contract's ID
// rule.
func WithDefaultSession(session string) Option {
	return func(o *options) error {
		if err := events.ValidateID("session", session); err != nil {
			return invalid("WithDefaultSession", "%v", err)
		}
		o.session = session
		return nil
	}
}

// WithLabels sets the gateway's default labels: every call's events carry
// them, under the client key's labels (the key file's "labels") and the
// request's X-Ledger-Labels header ("team=search, user=u-42"), a key set
// in a later one winning. They follow the contract's rules (see
// ledger.Labels); the error wraps the *ledger.LabelError naming the key
// and the rule. It is cmd/gateway's --labels. The map is copied.
func WithLabels(l ledger.Labels) Option {
	return func(o *options) error {
		if err := l.Validate(); err != nil {
			return fmt.Errorf("%w: gateway.WithLabels: %w", ledger.ErrInvalidOption, err)
		}
		o.labels = l.Merge(nil)
		return nil
	}
}

// WithLogger receives the gateway's records (refusals at WARN, never a
// credential); default: none.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return invalid("WithLogger", "logger must not be nil")
		}
		o.log = l
		return nil
	}
}

// WithTracerProvider sets where the spans of the gateway's calls go: a
// client span per call, named "{gen_ai.operation.name}
// {gen_ai.request.model}", with a child per attempt, after the
// OpenTelemetry GenAI conventions (ledger.SemconvVersion;
// docs/telemetry.md); a client's traceparent header makes it part of
// the client's trace. The default is otel's global provider, a no-op
// unless the program set one; a provider of trace/noop turns the spans
// off entirely. The caller owns the provider and flushes it after Close.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) error {
		if tp == nil {
			return invalid("WithTracerProvider", "provider must not be nil")
		}
		o.tracer = tp
		return nil
	}
}

// WithMeterProvider sets where the gateway's GenAI histograms go
// (gen_ai.client.token.usage, every attempt's tokens;
// gen_ai.client.operation.duration, each call's). The default is otel's
// global provider, a no-op unless the program set one; a provider of
// metric/noop turns them off entirely. The caller owns the provider.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) error {
		if mp == nil {
			return invalid("WithMeterProvider", "provider must not be nil")
		}
		o.meter = mp
		return nil
	}
}

// Limits are what one client can hold of the gateway. A zero field keeps
// its default; none may be negative.
type Limits struct {
	// MaxConnections caps the client connections open at once on Serve's
	// listener: at the cap a new one takes the slot of an idle one, else
	// waits until one closes. Default 8192, lowered to the file
	// descriptor limit less 512.
	MaxConnections int
	// MaxCallsPerClient caps the requests in flight of one client (its
	// key, else a digest of its credential): 429 with retry-after beyond.
	// Default 1024.
	MaxCallsPerClient int
	// MaxBodyBytesInFlight is the byte budget of the request bodies held
	// at once, across every call: 503 with retry-after beyond. Default
	// 512 MiB.
	MaxBodyBytesInFlight int64
	// MaxRequestBytes bounds a request body (413 beyond), default 32 MiB;
	// MaxResponseBytes an upstream's answer that is not streamed and each
	// event of a stream, default 64 MiB.
	MaxRequestBytes, MaxResponseBytes int64
	// HeaderTimeout bounds the reading of a request's headers (default
	// 10 s); IdleTimeout, a keep-alive connection's wait for its next
	// request (default 2 min). Serve's.
	HeaderTimeout, IdleTimeout time.Duration
	// BodyTimeout plus one second per MinBodyRate bytes bounds the
	// arrival of a request body (408 beyond); defaults 10 s and 32 KiB a
	// second.
	BodyTimeout time.Duration
	MinBodyRate int64
	// WriteTimeout bounds each write to a client (each event of a stream,
	// not the whole stream); default 1 min.
	WriteTimeout time.Duration
	// ShutdownTimeout is how long the calls in flight may finish once
	// Serve's context ends, before they are cut; default 30 s.
	ShutdownTimeout time.Duration
}

// Defaults of Limits that the handler does not set itself.
const (
	defaultMaxConnections  = 8192
	fdReserve              = 512
	defaultHeaderTimeout   = 10 * time.Second
	defaultIdleTimeout     = 2 * time.Minute
	defaultShutdownTimeout = 30 * time.Second
)

func (l Limits) validate() error {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"MaxConnections", int64(l.MaxConnections)}, {"MaxCallsPerClient", int64(l.MaxCallsPerClient)},
		{"MaxBodyBytesInFlight", l.MaxBodyBytesInFlight}, {"MaxRequestBytes", l.MaxRequestBytes},
		{"MaxResponseBytes", l.MaxResponseBytes}, {"HeaderTimeout", int64(l.HeaderTimeout)},
		{"IdleTimeout", int64(l.IdleTimeout)}, {"BodyTimeout", int64(l.BodyTimeout)},
		{"MinBodyRate", l.MinBodyRate}, {"WriteTimeout", int64(l.WriteTimeout)},
		{"ShutdownTimeout", int64(l.ShutdownTimeout)},
	} {
		if f.v < 0 {
			return fmt.Errorf("Limits.%s is negative; it must be positive (0: the default)", f.name)
		}
	}
	return nil
}

// withDefaults fills the limits Serve applies.
func (l Limits) withDefaults() Limits {
	set := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if l.MaxConnections == 0 {
		l.MaxConnections = defaultMaxConnections
	}
	set(&l.HeaderTimeout, defaultHeaderTimeout)
	set(&l.IdleTimeout, defaultIdleTimeout)
	set(&l.ShutdownTimeout, defaultShutdownTimeout)
	return l
}

// check refuses what no option can refuse alone.
func (o *options) check() error {
	dests := 0
	for _, set := range []bool{o.conn != nil, o.natsURL != "", o.pub != nil} {
		if set {
			dests++
		}
	}
	switch {
	case dests == 0:
		return invalid("New", "no destination for the attempt events: give WithNATS, WithNATSURL or WithPublisher")
	case o.conn != nil && o.natsURL != "":
		return invalid("WithNATSURL", "not with WithNATS: give one connection")
	case o.keysFile != "" && o.insecure:
		return invalid("WithInsecureNoAuth", "not with WithKeysFile")
	}
	return nil
}

// loadKeys reads WithKeysFile's file, nil without one.
func (o *options) loadKeys() (*internal.Keys, error) {
	if o.keysFile == "" {
		return nil, nil
	}
	keys, err := internal.LoadKeys(o.keysFile, os.Getenv)
	if err != nil {
		return nil, invalid("WithKeysFile", "%v", err)
	}
	return keys, nil
}
