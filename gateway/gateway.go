package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agentledger/ledger"
	internal "github.com/agentledger/ledger/internal/gateway"
	"github.com/agentledger/ledger/internal/netlimit"
	"github.com/agentledger/ledger/internal/provider"
	_ "github.com/agentledger/ledger/internal/provider/builtin" // the providers it speaks for
	"github.com/agentledger/ledger/internal/pubsink"
	"github.com/agentledger/ledger/internal/retry"
	"github.com/agentledger/ledger/internal/topology"
)

// setupTimeout bounds what New does on NATS: connecting, checking the
// stream, creating the bucket of attempt numbers.
const setupTimeout = 30 * time.Second

// ErrNoKeys is returned by Serve for a listener beyond loopback when the
// gateway has no client keys (WithKeysFile) and was not told
// WithInsecureNoAuth.
var ErrNoKeys = errors.New("gateway: not a loopback address, and there are no client keys")

// Gateway is the ledger's HTTP gateway as an http.Handler: it serves the
// providers' own APIs, runs every model call through the retry middleware
// and publishes one attempt event per attempt (see the package
// documentation). It is safe for concurrent use. Serve serves it with the
// command's limits; Close drains its events.
type Gateway struct {
	h        *internal.Gateway
	log      *slog.Logger
	limits   Limits
	refusals *netlimit.Refusals
	keyed    bool
	insecure bool

	pub     *ledger.Publisher       // where the events go
	ownPub  bool                    // made by New: Close closes it, else flushes it
	ownConn *ledger.Conn            // made by New (WithNATSURL): Close closes it
	numbers internal.AttemptNumbers // on NATS; nil: the handler's, in memory

	closeOnce sync.Once
	closeErr  error
}

// New validates the options and returns a Gateway. It needs a
// destination for the events: WithNATS, WithNATSURL or WithPublisher.
// On NATS it checks that the stream LEDGER_ATTEMPTS exists and creates
// the bucket of attempt numbers when missing, within 30 s.
func New(opts ...Option) (*Gateway, error) {
	var o options
	for _, opt := range opts {
		if opt == nil {
			return nil, invalid("New", "nil option")
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	keys, err := o.loadKeys()
	if err != nil {
		return nil, err
	}
	log := o.log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &Gateway{log: log, limits: o.limits.withDefaults(), keyed: keys != nil, insecure: o.insecure, pub: o.pub}
	if err := g.open(&o); err != nil {
		g.release()
		return nil, err
	}
	policy := retry.DefaultPolicy()
	if o.policy != nil {
		policy = *o.policy
	}
	tp, mp := retry.LibraryProviders(o.tracer, o.meter)
	g.refusals = netlimit.NewRefusals(log, 0, nil)
	providers := provider.Builtin()
	for _, p := range o.compat {
		if err := providers.Add(p); err != nil {
			g.release()
			return nil, invalid("WithOpenAICompatible", "%v", err)
		}
	}
	g.h, err = internal.New(internal.Config{
		Providers:         providers,
		Upstreams:         o.upstreams,
		Retry:             retry.Options{Policy: policy, Sink: pubsink.Of(g.pub), Logger: log, TracerProvider: tp, MeterProvider: mp},
		Attempts:          g.numbers,
		Keys:              keys,
		DefaultSession:    o.session,
		Labels:            o.labels,
		AttemptTimeout:    policy.AttemptTimeout,
		StreamIdleTimeout: policy.StreamIdleTimeout,
		MaxRequestBytes:   o.limits.MaxRequestBytes,
		MaxResponseBytes:  o.limits.MaxResponseBytes,
		Logger:            log,
		Limits: internal.Limits{
			MaxBodyBytesInFlight: o.limits.MaxBodyBytesInFlight,
			MaxCallsPerClient:    o.limits.MaxCallsPerClient,
			Timeouts:             netlimit.Timeouts{BodyTimeout: o.limits.BodyTimeout, MinBodyRate: o.limits.MinBodyRate, WriteTimeout: o.limits.WriteTimeout},
			Refusals:             g.refusals,
		},
	})
	if err != nil {
		g.release()
		// The handler's configuration is the options': name the option.
		msg, option := strings.TrimPrefix(err.Error(), "gateway: "), "New"
		if strings.HasPrefix(msg, "Upstreams") {
			option = "WithUpstream"
		}
		return nil, invalid(option, "%s", msg)
	}
	return g, nil
}

// open connects (WithNATSURL) and starts the publisher the gateway owns
// (WithNATS, WithNATSURL without WithPublisher); o.conn is then the
// connection, if any.
func (g *Gateway) open(o *options) error {
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	if o.natsURL != "" {
		conn, err := ledger.Connect(ctx, append([]ledger.ConnectOption{ledger.WithURL(o.natsURL), ledger.WithName("ledger-gateway"), ledger.WithLogger(g.log)}, o.connOpts...)...)
		if err != nil {
			return fmt.Errorf("gateway: WithNATSURL: %w", err)
		}
		g.ownConn, o.conn = conn, conn
	}
	if g.pub == nil {
		pub, err := ledger.NewPublisher(ctx, o.conn.JetStream(), ledger.WithPublisherLogger(g.log),
			ledger.WithPublishErrorHandler(func(err error) { g.log.Warn("gateway: publish failed; retrying", slog.Any("error", err)) }))
		if err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
		g.pub, g.ownPub = pub, true
	}
	if o.conn != nil {
		kv, err := topology.EnsureGatewayAttempts(ctx, o.conn.JetStream(), topology.Config{}, topology.DefaultGatewayAttemptsTTL)
		if err != nil {
			return fmt.Errorf("gateway: the bucket of attempt numbers: %w", err)
		}
		g.numbers = internal.NewKVAttempts(kv, internal.NewKVLedger(o.conn.JetStream()))
	}
	return nil
}

// ServeHTTP accounts the providers' model calls and proxies everything
// else through.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) { g.h.ServeHTTP(w, r) }

// Serve serves the gateway on ln until ctx ends, with cmd/gateway's
// hardening: at most Limits.MaxConnections connections (lowered to the
// file descriptor limit less a reserve), header, body, write and idle
// timeouts, refusals logged at WARN; then it stops accepting, lets the
// calls in flight finish within Limits.ShutdownTimeout (then cuts them)
// and returns. It logs "gateway: listening" with addr, the address it
// serves (port 0 picks a free one). It closes ln. Without client keys it
// serves loopback only (ErrNoKeys), unless WithInsecureNoAuth. Call Close
// after it returns.
func (g *Gateway) Serve(ctx context.Context, ln net.Listener) error {
	if ln == nil {
		return invalid("Serve", "listener must not be nil")
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && !tcp.IP.IsLoopback() && !g.keyed && !g.insecure {
		ln.Close()
		return fmt.Errorf("%w: %s: anyone who reaches it could spend the credentials it forwards and write to the ledger; give WithKeysFile, listen on 127.0.0.1, or give WithInsecureNoAuth", ErrNoKeys, ln.Addr())
	}
	if g.insecure && !g.keyed {
		g.log.Warn("gateway: serving without client keys (WithInsecureNoAuth): anyone who reaches the address can spend the credentials it forwards and write to the ledger")
	}
	conns, limit, lowered := netlimit.DescriptorCap(g.limits.MaxConnections, fdReserve)
	if lowered {
		g.log.Warn("gateway: Limits.MaxConnections lowered to the file descriptor limit less a reserve; raise ulimit -n to serve more",
			"max_connections", g.limits.MaxConnections, "fd_limit", limit, "reserve", fdReserve, "cap", conns)
	}
	capped, err := netlimit.NewListener(ln, conns, g.refusals)
	if err != nil {
		ln.Close()
		return fmt.Errorf("gateway: %w", err)
	}
	g.log.Info("gateway: listening", "addr", capped.Addr().String(), "max_connections", capped.Max())
	srv := netlimit.Server{Name: "gateway", HeaderTimeout: g.limits.HeaderTimeout, IdleTimeout: g.limits.IdleTimeout,
		ShutdownTimeout: g.limits.ShutdownTimeout, Logger: g.log}
	return srv.Serve(ctx, capped, g)
}

// Close drains the events: a publisher New made is closed (its events
// published, within ctx), one given by WithPublisher is flushed (its
// owner closes it), and a connection New made is closed. When some
// events were not acknowledged before ctx ended, the error says how
// many. Call it once the server stopped: a call answered after Close
// cannot publish its events. Close is idempotent.
func (g *Gateway) Close(ctx context.Context) error {
	g.closeOnce.Do(func() {
		if g.ownPub {
			if _, err := g.pub.Close(ctx); err != nil {
				g.closeErr = fmt.Errorf("gateway: closing: %w", err)
			}
		} else if err := g.pub.Flush(ctx); err != nil {
			g.closeErr = fmt.Errorf("gateway: closing: %w", err)
		}
		if g.ownConn != nil {
			g.ownConn.Close()
		}
	})
	return g.closeErr
}

// release undoes what New opened when it fails.
func (g *Gateway) release() {
	if g.ownPub {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, _ = g.pub.Close(ctx)
	}
	if g.ownConn != nil {
		g.ownConn.Close()
	}
}
