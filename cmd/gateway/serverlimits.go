package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"github.com/agentledger/ledger/internal/cli"
	"github.com/agentledger/ledger/internal/gateway"
	"github.com/agentledger/ledger/internal/monitor"
	"github.com/agentledger/ledger/internal/netlimit"
)

// Defaults of the server limits' flags.
const (
	defaultMaxConnections = 8192
	defaultHeaderTimeout  = 10 * time.Second
	defaultIdleTimeout    = 2 * time.Minute
	// fdReserve are the file descriptors kept for what is not a client
	// connection: NATS, the upstreams, files.
	fdReserve = 512
	// memoryOverhead is the gateway's memory beside the bodies in flight
	// (connections, streams, the publisher's queue), for its soft memory
	// limit.
	memoryOverhead = 256 << 20
)

// limitFlags are the server limits: what one client can hold of the
// gateway, and where its metrics are served.
type limitFlags struct {
	maxConns          int
	maxCallsPerClient int
	maxEstimates      int
	maxBodyInFlight   int64
	headerTimeout     time.Duration
	idleTimeout       time.Duration
	timeouts          netlimit.Timeouts
	metricsAddr       string
}

func (l *limitFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&l.maxConns, "max-connections", defaultMaxConnections, "most client connections open at once; at the cap a new one takes the slot of an idle one, else waits until one closes (lowered to the file descriptor limit less "+fmt.Sprint(fdReserve)+")")
	fs.IntVar(&l.maxCallsPerClient, "max-calls-per-client", gateway.DefaultMaxCallsPerClient, "most requests in flight of one client (a digest of its credential); past it 429 with retry-after")
	fs.IntVar(&l.maxEstimates, "max-estimates", runtime.GOMAXPROCS(0), "most tokenizer estimates at once (the input of an OpenAI stream whose usage never came); past it the estimate is skipped, counted and logged (estimate_skipped), never waited for")
	fs.Int64Var(&l.maxBodyInFlight, "max-body-bytes-in-flight", gateway.DefaultMaxBodyBytesInFlight, "byte budget of the request bodies held at once, across every call; past it 503 with retry-after")
	fs.DurationVar(&l.headerTimeout, "header-timeout", defaultHeaderTimeout, "longest time to read a request's headers")
	fs.DurationVar(&l.timeouts.BodyTimeout, "body-timeout", netlimit.DefaultBodyTimeout, "time a request body may take to arrive, plus one second per --min-body-rate bytes; past it 408")
	fs.Int64Var(&l.timeouts.MinBodyRate, "min-body-rate", netlimit.DefaultMinBodyRate, "bytes a second a request body must arrive at, beyond --body-timeout")
	fs.DurationVar(&l.timeouts.WriteTimeout, "write-timeout", netlimit.DefaultWriteTimeout, "longest time of each write to a client (each event of a stream, not the whole stream)")
	fs.DurationVar(&l.idleTimeout, "idle-timeout", defaultIdleTimeout, "how long an idle keep-alive connection is kept")
	fs.StringVar(&l.metricsAddr, "metrics-addr", "", "serve /metrics, /healthz and /readyz on this address, e.g. 127.0.0.1:9465 (default: off); never on --listen, whose paths are the providers'")
}

func (l *limitFlags) validate() error {
	switch {
	case l.maxConns < 1:
		return cli.Usagef("--max-connections: %d must be at least 1", l.maxConns)
	case l.maxCallsPerClient < 1:
		return cli.Usagef("--max-calls-per-client: %d must be at least 1", l.maxCallsPerClient)
	case l.maxEstimates < 1:
		return cli.Usagef("--max-estimates: %d must be at least 1", l.maxEstimates)
	case l.maxBodyInFlight < 1:
		return cli.Usagef("--max-body-bytes-in-flight: %d must be positive", l.maxBodyInFlight)
	case l.headerTimeout <= 0:
		return cli.Usagef("--header-timeout: %s must be positive", l.headerTimeout)
	case l.idleTimeout <= 0:
		return cli.Usagef("--idle-timeout: %s must be positive", l.idleTimeout)
	case l.timeouts.BodyTimeout <= 0:
		return cli.Usagef("--body-timeout: %s must be positive", l.timeouts.BodyTimeout)
	case l.timeouts.MinBodyRate < 1:
		return cli.Usagef("--min-body-rate: %d must be positive", l.timeouts.MinBodyRate)
	case l.timeouts.WriteTimeout <= 0:
		return cli.Usagef("--write-timeout: %s must be positive", l.timeouts.WriteTimeout)
	}
	return nil
}

// gatewayLimits are the limits the gateway's handler applies.
func (l *limitFlags) gatewayLimits(refusals *netlimit.Refusals) gateway.Limits {
	return gateway.Limits{MaxBodyBytesInFlight: l.maxBodyInFlight, MaxCallsPerClient: l.maxCallsPerClient, MaxEstimates: l.maxEstimates, Timeouts: l.timeouts, Refusals: refusals}
}

// connectionCap is --max-connections, lowered to what the file
// descriptor limit leaves (with a warning): a gateway out of descriptors
// cannot reach NATS or the upstreams either.
func (l *limitFlags) connectionCap(logger *slog.Logger) int {
	c, limit, lowered := netlimit.DescriptorCap(l.maxConns, fdReserve)
	if lowered {
		logger.Warn("gateway: --max-connections lowered to the file descriptor limit less a reserve; raise ulimit -n to serve more",
			"max_connections", l.maxConns, "fd_limit", limit, "reserve", fdReserve, "cap", c)
	}
	return c
}

// limitMemory sets the process's soft memory limit to the body budget
// plus memoryOverhead, unless GOMEMLIMIT is set (GOMEMLIMIT=off lifts
// it): the garbage collector then frees a flood's bodies as they go rather
// than letting the heap grow to twice what is live. Past the limit it
// works harder; it never fails an allocation.
func (l *limitFlags) limitMemory(logger *slog.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	limit := l.maxBodyInFlight + memoryOverhead
	debug.SetMemoryLimit(limit)
	logger.Debug("gateway: soft memory limit", "bytes", limit)
}

// server is how the gateway's listener is served: the header and idle
// timeouts here, no total read or write timeout (the body's and each
// write's are the handler's, netlimit.Timeouts, so that streams last),
// the calls in flight given shutdown to finish at the end.
func (l *limitFlags) server(shutdown time.Duration, logger *slog.Logger) netlimit.Server {
	return netlimit.Server{Name: "gateway", HeaderTimeout: l.headerTimeout, IdleTimeout: l.idleTimeout, ShutdownTimeout: shutdown, Logger: logger}
}

// serveMetrics serves the gateway's metrics on --metrics-addr, when set,
// until the returned stop is called.
func serveMetrics(ctx context.Context, ln net.Listener, src monitor.GatewaySource, ready http.HandlerFunc, logger *slog.Logger) (stop func()) {
	if ln == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := monitor.Serve(ctx, ln, monitor.NewGatewayRegistry(src), ready, logger); err != nil {
			logger.Error("gateway: metrics server stopped", "error", err)
		}
	})
	logger.Info("gateway: serving metrics", "addr", ln.Addr().String(), "paths", "/metrics /healthz /readyz")
	return func() {
		cancel()
		wg.Wait()
	}
}
