package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"time"

	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/cli"
	"github.com/agentledger/ledger/internal/connect"
	"github.com/agentledger/ledger/internal/emit"
	"github.com/agentledger/ledger/internal/fleet"
	"github.com/agentledger/ledger/internal/gateway"
	"github.com/agentledger/ledger/internal/guardflag"
	"github.com/agentledger/ledger/internal/logflag"
	"github.com/agentledger/ledger/internal/monitor"
	"github.com/agentledger/ledger/internal/netlimit"
	"github.com/agentledger/ledger/internal/pricing"
	"github.com/agentledger/ledger/internal/provider"
	_ "github.com/agentledger/ledger/internal/provider/builtin" // the providers the gateway speaks for
	"github.com/agentledger/ledger/internal/retry"
	"github.com/agentledger/ledger/internal/telemetry"
	"github.com/agentledger/ledger/internal/topology"
)

// Exit statuses are those of package cli, the same for every command.
func main() {
	cli.Main(func(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
		return command(ctx, args, stdout, stderr)
	})
}

const usage = `usage: gateway [run] [flags]

Serves the providers' own APIs on --listen and runs every model call
through the ledger's retry middleware, publishing one event per attempt.
Point an SDK's base URL at it: Anthropic http://ADDR, OpenAI
http://ADDR/v1, Gemini http://ADDR; an OpenAI-compatible upstream named
with --upstream (mistral, ollama, ...) http://ADDR/NAME/v1. Set the SDK's
own retries to 0.

Without --keys it serves loopback addresses only (--insecure-no-auth
overrides, with a warning). "gateway key new NAME" makes a client key.

--listen 127.0.0.1:0 picks a free port (for tests): once it accepts
connections the gateway prints one line on stdout,
"gateway listening on http://ADDR", and logs "gateway: listening" with
addr=ADDR on stderr. A Go program or test can embed the gateway instead:
package github.com/agentledger/ledger/gateway, ledgertest.StartGateway.

Run "gateway run -h" for the flags.`

func command(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "run":
			args = args[1:]
		case "key":
			return keyCommand(args[1:], stdout, stderr)
		case "help", "-h", "-help", "--help":
			fmt.Fprintln(stdout, usage)
			return cli.ExitOK
		default:
			if args[0] != "" && args[0][0] != '-' {
				fmt.Fprintf(stderr, "gateway: unknown command %q\n%s\n", args[0], usage)
				return cli.ExitUsage
			}
		}
	}
	return cli.Report("gateway", stderr, run(ctx, args, stdout, stderr))
}

// flags are the command's flags.
type flags struct {
	pricesFile                    string
	prices                        *pricing.Catalog // the default catalog merged with --prices
	conn                          connect.Options
	logs                          logflag.Flags
	listen                        string
	upstreams                     map[string]*string
	defaultSession                string
	labels                        cli.Labels
	forward                       bool
	policy                        retry.Policy
	breakerThreshold              int
	breakerCooldown               time.Duration
	fleetLimits                   string
	fleetWait                     time.Duration
	guardSets                     guardflag.Flags // limits.go
	attemptTimeout, idleTimeout   time.Duration
	maxRequest, maxResponse       int64
	attemptsTTL                   time.Duration
	create                        bool
	topo                          topology.Config
	drainTimeout, shutdownTimeout time.Duration
	auth                          authFlags
	outbox                        string
	outboxEvents                  int
	outboxBytes                   int64
	// Server limits (serverlimits.go): connections, calls per client,
	// bodies in flight, timeouts, metrics.
	limits limitFlags
	// OpenAI-compatible upstreams (upstreams.go), and the providers
	// validate made of them.
	compat    upstreamFlags
	compatAPI []provider.Provider
}

func parseFlags(args []string, stderr io.Writer) (*flags, error) {
	f := &flags{upstreams: map[string]*string{}, policy: retry.DefaultPolicy()}
	fs := flag.NewFlagSet("gateway run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, usage+"\n\nFlags:")
		fs.PrintDefaults()
	}
	connect.RegisterFlags(fs, &f.conn)
	f.logs.Register(fs, "info")
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8088", "address to serve on (loopback only without --keys); port 0 picks a free one, printed on stdout as \"gateway listening on http://ADDR\" and logged as \"gateway: listening\" addr=ADDR")
	f.auth.register(fs)
	for _, p := range provider.All() {
		name := p.Name()
		f.upstreams[name] = fs.String(name+"-url", p.Upstream().Origin, "origin of the "+name+" upstream (scheme, host, port, and an optional path prefix the request's path is appended to)")
	}
	fs.StringVar(&f.defaultSession, "default-session", gateway.DefaultSession, "session of a request without "+gateway.HeaderSessionID)
	fs.Var(&f.labels, "labels", "default labels of every call, under a client key's and the request's "+gateway.HeaderLabels+": "+cli.LabelsUsage)
	fs.BoolVar(&f.forward, "forward-ledger-headers", false, "send "+gateway.HeaderSessionID+", "+gateway.HeaderRequestID+" and "+gateway.HeaderAttempt+" upstream (for the fake provider; real providers should never see them)")
	fs.IntVar(&f.policy.MaxRetries, "max-retries", f.policy.MaxRetries, "retries after a call's first attempt")
	fs.DurationVar(&f.policy.BaseDelay, "retry-base-delay", f.policy.BaseDelay, "wait before the first retry, doubling, with ±20% jitter")
	fs.DurationVar(&f.policy.MaxDelay, "retry-max-delay", f.policy.MaxDelay, "longest wait between attempts")
	fs.DurationVar(&f.policy.HintCap, "hint-cap", f.policy.HintCap, "longest Retry-After honoured; a longer one ends the call with the provider's answer")
	fs.IntVar(&f.breakerThreshold, "breaker-threshold", breaker.DefaultFailureThreshold, "consecutive retryable failures of a provider and model that open its circuit")
	fs.DurationVar(&f.breakerCooldown, "breaker-cooldown", breaker.DefaultCooldown, "how long an open circuit refuses calls before it admits a probe")
	fs.StringVar(&f.fleetLimits, "fleet-limits", "on", "on: the breaker, rate limits (learned from the providers' headers) and retry budget of each provider and model are shared by every gateway replica and agent process on this NATS (KV bucket ledger_upstreams); off: this process's own")
	fs.DurationVar(&f.fleetWait, "fleet-wait", fleet.DefaultWait, "with --fleet-limits on: the longest a call waits for the shared state before deciding alone")
	f.guardSets.Register(fs)
	fs.DurationVar(&f.attemptTimeout, "attempt-timeout", gateway.DefaultAttemptTimeout, "longest wait for an attempt's answer (a stream's first event)")
	fs.DurationVar(&f.idleTimeout, "stream-idle-timeout", gateway.DefaultStreamIdleTimeout, "longest silence between two events of a stream")
	fs.Int64Var(&f.maxRequest, "max-request-bytes", gateway.DefaultMaxRequestBytes, "largest request body taken (413 beyond)")
	fs.Int64Var(&f.maxResponse, "max-response-bytes", gateway.DefaultMaxResponseBytes, "largest answer that is not streamed, and largest event of a stream")
	fs.DurationVar(&f.attemptsTTL, "attempt-numbers-ttl", topology.DefaultGatewayAttemptsTTL, "how long the attempt numbers of a named request are kept after its last call, when the gateway creates ledger_gateway_attempts")
	fs.BoolVar(&f.create, "create-stream", false, "create LEDGER_ATTEMPTS when it is missing (normally the aggregator does)")
	fs.IntVar(&f.topo.Replicas, "replicas", 0, "replicas of what the gateway creates (the stream with --create-stream, its bucket), 1 to 5 (0: 1)")
	fs.DurationVar(&f.topo.DuplicateWindow, "duplicate-window", 0, "with --create-stream: the stream's duplicate window (0: 2m)")
	fs.DurationVar(&f.drainTimeout, "drain-timeout", 30*time.Second, "how long to wait at the end for the stream to acknowledge the events")
	fs.StringVar(&f.outbox, "outbox", "", "keep every event on disk in this `directory` until the stream acknowledges it (fsynced before the call's answer); the next start with the same --outbox delivers what a stopped or killed gateway left, exactly once (default: in memory only, lost if the gateway stops during a NATS outage)")
	fs.IntVar(&f.outboxEvents, "outbox-max-events", emit.DefaultOutboxMaxEvents, "with --outbox: most unacknowledged events kept; when full, calls wait for acks and are refused past their deadline")
	fs.Int64Var(&f.outboxBytes, "outbox-max-bytes", emit.DefaultOutboxMaxBytes, "with --outbox: most bytes of unacknowledged events kept")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long calls in flight may finish after SIGINT/SIGTERM before they are cut")
	fs.StringVar(&f.pricesFile, "prices", "", "a price catalog `file` merged over the default catalog, to price each answer's attempt in the "+gateway.HeaderCost+" header (a trailer of a stream, after its last event); the ledger prices with the catalog it records (aggregator prices)")
	f.limits.register(fs)
	f.compat.register(fs)
	if err := cli.Parse(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, cli.Usagef("run takes no arguments, got %q", fs.Args())
	}
	return f, f.validate()
}

// loadPrices returns the default catalog merged with the catalog file
// (none: the default alone).
func loadPrices(file string) (*pricing.Catalog, error) {
	if file == "" {
		return pricing.Default(), nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	user, err := pricing.Parse(data)
	if err != nil {
		return nil, err
	}
	return pricing.Default().Merge(user), nil
}

// validate checks what the gateway's packages would refuse later, naming
// the flag.
func (f *flags) validate() error {
	f.conn.ResolveServer(os.Getenv)
	if _, err := f.logs.New(io.Discard); err != nil {
		return cli.Usagef("%v", err)
	}
	for _, p := range slices.Sorted(maps.Keys(f.upstreams)) {
		if _, err := gateway.ParseOrigin(*f.upstreams[p]); err != nil {
			return cli.Usagef("--%s-url: %v", p, err)
		}
	}
	var err error
	if f.compatAPI, err = f.compat.parse(); err != nil {
		return err
	}
	if f.prices, err = loadPrices(f.pricesFile); err != nil {
		return cli.Usagef("--prices: %v", err)
	}
	if err := f.policy.Validate(); err != nil {
		return cli.Usagef("--max-retries / --retry-base-delay / --retry-max-delay / --hint-cap: %v", err)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--attempt-timeout", f.attemptTimeout}, {"--stream-idle-timeout", f.idleTimeout}, {"--breaker-cooldown", f.breakerCooldown}, {"--drain-timeout", f.drainTimeout}, {"--shutdown-timeout", f.shutdownTimeout}} {
		if d.v <= 0 {
			return cli.Usagef("%s: %s must be positive", d.name, d.v)
		}
	}
	switch {
	case f.fleetLimits != "on" && f.fleetLimits != "off":
		return cli.Usagef("--fleet-limits: %q must be on or off", f.fleetLimits)
	case f.fleetWait <= 0:
		return cli.Usagef("--fleet-wait: %s must be positive", f.fleetWait)
	case f.breakerThreshold < 1:
		return cli.Usagef("--breaker-threshold: %d must be at least 1", f.breakerThreshold)
	case f.maxRequest < 1:
		return cli.Usagef("--max-request-bytes: %d must be positive", f.maxRequest)
	case f.maxResponse < 1:
		return cli.Usagef("--max-response-bytes: %d must be positive", f.maxResponse)
	case f.outboxEvents < 1:
		return cli.Usagef("--outbox-max-events: %d must be at least 1", f.outboxEvents)
	case f.outboxBytes < 1:
		return cli.Usagef("--outbox-max-bytes: %d must be at least 1", f.outboxBytes)
	case f.attemptsTTL < 0:
		return cli.Usagef("--attempt-numbers-ttl: %s must not be negative (0 keeps them forever)", f.attemptsTTL)
	}
	if _, err := f.guardConfig(); err != nil {
		return err
	}
	if _, err := topology.AttemptsStreamConfig(f.topo); err != nil {
		return cli.Usagef("--replicas / --duplicate-window: %v", err)
	}
	if err := f.auth.validate(f.listen); err != nil {
		return err
	}
	return f.limits.validate()
}

// run serves until ctx ends.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	logger, _ := f.logs.New(stderr)
	if err := f.auth.load(logger); err != nil {
		return err
	}
	f.limits.limitMemory(logger)
	var metricsLn net.Listener
	if f.limits.metricsAddr != "" {
		if metricsLn, err = monitor.Listen(f.limits.metricsAddr); err != nil {
			return cli.Usagef("%v", err)
		}
		defer metricsLn.Close()
	}
	tel, err := telemetry.FromEnv(ctx, telemetry.Config{ServiceName: serviceName, Logger: logger})
	if err != nil {
		return cli.Usagef("%v", err)
	}
	// Last, after the events are drained: the spans of the last calls too.
	defer flushTelemetry(ctx, tel, f.drainTimeout, logger)
	ledger, err := openLedger(ctx, f, logger)
	if err != nil {
		return err
	}
	ctx = ledger.ctx // ends when the server refuses a permission
	refusals := netlimit.NewRefusals(logger, 0, nil)
	gw, err := newGateway(f, ledger, tel, refusals, logger)
	if err != nil {
		ledger.close(ctx, logger)
		return &cli.ExitError{Code: cli.ExitUsage, Err: err}
	}
	tcp, err := net.Listen("tcp", f.listen)
	if err != nil {
		ledger.close(ctx, logger)
		return cli.Usagef("--listen: %v", err)
	}
	ln, err := netlimit.NewListener(tcp, f.limits.connectionCap(logger), refusals)
	if err != nil {
		tcp.Close()
		ledger.close(ctx, logger)
		return cli.Usagef("--max-connections: %v", err)
	}
	stopMetrics := serveMetrics(ctx, metricsLn, monitor.GatewaySource{Gateway: gw, Listener: ln, Events: ledger.pub.Stats},
		monitor.GatewayReady(ledger.conn.NC), logger)
	defer stopMetrics()
	fmt.Fprintf(stdout, "gateway listening on http://%s\n", ln.Addr())
	logger.Info("gateway: listening", "addr", ln.Addr().String(), f.upstreamAttrs(), "forward_ledger_headers", f.forward,
		"max_connections", ln.Max(), "max_calls_per_client", f.limits.maxCallsPerClient, "max_body_bytes_in_flight", f.limits.maxBodyInFlight)
	serveErr := f.limits.server(f.shutdownTimeout, logger).Serve(ctx, ln, gw)
	st, closeErr := ledger.close(ctx, logger)
	logger.Info("gateway: stopped", "calls", gw.Middleware().Stats().Calls, "attempts", gw.Middleware().Stats().Attempts,
		"events_acked", st.Acked, "events_undelivered", st.Undelivered, "events_kept_in_outbox", st.Kept)
	switch {
	case ledger.conn.Denied() != nil:
		return &cli.ExitError{Code: cli.ExitUsage, Err: ledger.conn.Explain(serveErr)}
	case serveErr != nil:
		return &cli.ExitError{Code: cli.ExitUsage, Err: serveErr}
	case closeErr != nil || st.Undelivered > 0:
		return cli.Failed(fmt.Errorf("%d event(s) undelivered: %v", st.Undelivered, closeErr))
	}
	return nil
}

// serviceName is the gateway's service.name, unless OTEL_SERVICE_NAME
// says otherwise.
const serviceName = "ledger-gateway"

// flushTelemetry exports what the OpenTelemetry providers still hold and
// stops them, within wait; a collector that does not take it is logged,
// not an exit status.
func flushTelemetry(ctx context.Context, tel *telemetry.Providers, wait time.Duration, logger *slog.Logger) {
	if !tel.Enabled() {
		return
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait)
	defer cancel()
	if err := tel.Shutdown(fctx); err != nil {
		logger.Warn("gateway: telemetry not flushed", "error", err)
	}
}

// upstreamAttrs are the upstreams' origins, by provider name, for the
// log.
func (f *flags) upstreamAttrs() slog.Attr {
	var attrs []any
	for _, p := range slices.Sorted(maps.Keys(f.upstreams)) {
		attrs = append(attrs, slog.String(p, *f.upstreams[p]))
	}
	for _, p := range f.compatAPI {
		attrs = append(attrs, slog.String(p.Name(), p.Upstream().Origin))
	}
	return slog.Group("upstreams", attrs...)
}

// newGateway builds the gateway on the ledger's publisher and bucket. The
// middleware's breakers are a group of this process; a fleet-wide group
// (shared over NATS) is what Retry.Breakers takes when there is one.
func newGateway(f *flags, l *ledgerConn, tel *telemetry.Providers, refusals *netlimit.Refusals, logger *slog.Logger) (*gateway.Gateway, error) {
	ups := make(map[string]string, len(f.upstreams))
	for p, u := range f.upstreams {
		ups[p] = *u
	}
	providers := provider.Builtin()
	for _, p := range f.compatAPI {
		if err := providers.Add(p); err != nil {
			return nil, fmt.Errorf("--upstream %s: %w", p.Name(), err)
		}
	}
	return gateway.New(gateway.Config{
		Providers: providers,
		Upstreams: ups,
		Retry: retry.Options{Policy: f.policy, Sink: l.pub, Guards: l.guards, Logger: logger,
			TracerProvider: tel.TracerProvider, MeterProvider: tel.MeterProvider},
		Attempts:             gateway.NewKVAttempts(l.attempts, gateway.NewKVLedger(l.conn.JS)),
		Keys:                 f.auth.loaded,
		DefaultSession:       f.defaultSession,
		Labels:               f.labels.L,
		ForwardLedgerHeaders: f.forward,
		AttemptTimeout:       f.attemptTimeout,
		StreamIdleTimeout:    f.idleTimeout,
		MaxRequestBytes:      f.maxRequest,
		MaxResponseBytes:     f.maxResponse,
		Logger:               logger,
		Limits:               f.limits.gatewayLimits(refusals),
		Prices:               f.prices,
	})
}
