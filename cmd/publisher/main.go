package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/agentledger/ledger/internal/cli"
	connectpkg "github.com/agentledger/ledger/internal/connect"
	"github.com/agentledger/ledger/internal/emit"
	"github.com/agentledger/ledger/internal/logflag"
	"github.com/agentledger/ledger/internal/topology"
)

// errInterrupted ends a run that a signal stopped: the work is not done,
// a runtime condition like any other (exit 2), though what was enqueued
// was flushed.
var errInterrupted = cli.Usagef("interrupted; what was enqueued was flushed")

func main() {
	// genai logs every failed stream through the standard logger; the
	// simulator's stalled streams fail on purpose, and its own records go
	// to the slog logger on stderr.
	log.SetOutput(io.Discard)
	cli.Main(func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
		return cli.Report("publisher", stderr, run(ctx, args, stdin, stdout, stderr))
	})
}

const usage = `usage: publisher <simulate|ingest|fakeprovider> [flags]

  simulate [flags]          run a simulated fleet, publishing every attempt
  ingest [flags] [FILE|-]   publish JSON-lines events (default: stdin)
  fakeprovider [flags]      serve the simulator's fake provider over HTTP
                            (for the gateway); it publishes nothing

simulate and ingest take the connection flags --nats-url, --creds, --nkey, --tls-ca,
--tls-cert, --tls-key and --context (or $NATS_URL, $NATS_CREDS, $NATS_NKEY,
$NATS_CA, $NATS_CERT, $NATS_KEY, $NATS_CONTEXT; default server
nats://127.0.0.1:4222), and --log-format text|json. LEDGER_ATTEMPTS must
exist (the aggregator creates it) unless --create-stream is given.
Exit status: 0 ok, 1 some event undelivered or some line invalid, 2 usage
or runtime error (including an interrupted run).

Run "publisher <command> -h" for the flags of a command.`

// run dispatches to a subcommand.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return cli.Usagef("no command")
	}
	switch args[0] {
	case "simulate":
		return runSimulate(ctx, args[1:], stdout, stderr)
	case "ingest":
		return runIngest(ctx, args[1:], stdin, stdout, stderr)
	case "fakeprovider":
		return runFakeProvider(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, usage)
		return nil
	}
	fmt.Fprintln(stderr, usage)
	return cli.Usagef("unknown command %q", args[0])
}

// natsFlags are the connection, stream and logging flags both
// subcommands share.
type natsFlags struct {
	conn         connectpkg.Options
	drainTimeout time.Duration
	create       bool
	topo         topology.Config
	logs         logflag.Flags
	outbox       string
	outboxEvents int
	outboxBytes  int64
}

func (n *natsFlags) register(fs *flag.FlagSet) {
	connectpkg.RegisterFlags(fs, &n.conn)
	fs.DurationVar(&n.drainTimeout, "drain-timeout", 30*time.Second, "how long to wait at the end for the stream to acknowledge what was enqueued")
	fs.BoolVar(&n.create, "create-stream", false, "create LEDGER_ATTEMPTS when it is missing (normally the aggregator does); warns when the existing one differs from --replicas and --duplicate-window")
	fs.IntVar(&n.topo.Replicas, "replicas", 0, "with --create-stream: replicas of the stream, 1 to 5 (0: the default, 1)")
	fs.DurationVar(&n.topo.DuplicateWindow, "duplicate-window", 0, "with --create-stream: the stream's duplicate window (0: the default, 2m)")
	fs.StringVar(&n.outbox, "outbox", "", "keep every event on disk in this `directory` until the stream acknowledges it (fsynced before it is counted enqueued); the next run with the same --outbox delivers what a stopped or killed run left, exactly once (default: in memory only)")
	fs.IntVar(&n.outboxEvents, "outbox-max-events", emit.DefaultOutboxMaxEvents, "with --outbox: most unacknowledged events kept; when full, publishing waits for acks")
	fs.Int64Var(&n.outboxBytes, "outbox-max-bytes", emit.DefaultOutboxMaxBytes, "with --outbox: most bytes of unacknowledged events kept")
	n.logs.Register(fs, "warn")
}

// createConfig is what --create-stream asks for; nil without it.
func (n *natsFlags) createConfig() *topology.Config {
	if !n.create {
		return nil
	}
	return &n.topo
}

func (n *natsFlags) validate() error {
	n.conn.ResolveServer(os.Getenv)
	if n.drainTimeout <= 0 {
		return cli.Usagef("--drain-timeout: %s must be positive", n.drainTimeout)
	}
	if n.outboxEvents < 1 || n.outboxBytes < 1 {
		return cli.Usagef("--outbox-max-events / --outbox-max-bytes: %d and %d must be positive", n.outboxEvents, n.outboxBytes)
	}
	if _, err := topology.AttemptsStreamConfig(n.topo); err != nil {
		return cli.Usagef("--replicas / --duplicate-window: %v", err)
	}
	if _, err := n.logs.New(io.Discard); err != nil {
		return cli.Usagef("%v", err)
	}
	return nil
}

// session is a connection to NATS with the ledger's stream and an emit
// publisher on it. close must be called.
type session struct {
	conn  *connectpkg.Conn
	pub   *emit.Publisher
	drain time.Duration
	// ctx is the caller's, ended as soon as the server refuses a
	// permission (connect.Conn.Guard); unguard releases it.
	ctx     context.Context
	unguard context.CancelFunc
}

// connect reaches NATS, checks (or, asked to, creates) LEDGER_ATTEMPTS
// and starts a publisher.
func connect(ctx context.Context, n natsFlags, logger *slog.Logger) (*session, error) {
	o := n.conn
	o.Name, o.Logger = "ledger-publisher", logger
	conn, err := connectpkg.Open(o)
	if err != nil {
		return nil, &cli.ExitError{Code: cli.ExitUsage, Err: err}
	}
	gctx, unguard := conn.Guard(ctx)
	ectx, cancel := context.WithTimeout(gctx, 10*time.Second)
	defer cancel()
	if err := topology.PrepareAttempts(ectx, conn.JS, n.createConfig(), logger); err != nil {
		if errors.Is(err, topology.ErrNoAttempts) {
			err = fmt.Errorf("%w: start the aggregator first, or pass --create-stream", err)
		}
		unguard()
		conn.Close()
		return nil, &cli.ExitError{Code: cli.ExitUsage, Err: conn.Explain(err)}
	}
	opts := []emit.Option{emit.WithErrorHandler(func(err error) { logger.Warn("publish failed; retrying", slog.Any("error", err)) })}
	if n.create {
		opts = append(opts, emit.WithEnsureStream(n.topo))
	}
	if n.outbox != "" {
		opts = append(opts, emit.WithOutbox(n.outbox), emit.WithOutboxLimits(n.outboxEvents, n.outboxBytes))
	}
	pub, err := emit.New(conn.JS, opts...)
	if err != nil {
		unguard()
		conn.Close()
		return nil, &cli.ExitError{Code: cli.ExitUsage, Err: err}
	}
	if st := pub.Stats(); st.Recovered > 0 {
		logger.Warn("publisher: delivering the events an earlier run left in the outbox", "outbox", n.outbox, "events", st.Recovered)
	}
	return &session{conn: conn, pub: pub, drain: n.drainTimeout, ctx: gctx, unguard: unguard}, nil
}

// close drains the publisher (even when ctx is done: what was enqueued is
// flushed within the drain timeout) and closes the connection. Events left
// in the outbox are not an error: the next run delivers them; they are
// logged at WARN and counted in Stats.Kept.
func (s *session) close(ctx context.Context, logger *slog.Logger) (emit.Stats, error) {
	// The drain ends early only when the server refuses a permission:
	// retrying until the drain timeout could not help.
	gctx, unguard := s.conn.Guard(context.WithoutCancel(ctx))
	defer unguard()
	dctx, cancel := context.WithTimeout(gctx, s.drain)
	defer cancel()
	st, err := s.pub.Close(dctx)
	s.conn.Close()
	if kept(err) {
		logger.Warn("publisher: events kept in the outbox; the next run with the same --outbox delivers them", "error", err)
		st.Undelivered, err = 0, nil
	}
	return st, err
}

// explain reports a permission the server refused, which names the
// subject, in place of err, its consequence (see connect.Conn.Explain),
// as a runtime error. It ends s.ctx: call it last.
func (s *session) explain(err error) error {
	s.unguard()
	if s.conn.Denied() == nil {
		return err
	}
	return &cli.ExitError{Code: cli.ExitUsage, Err: s.conn.Explain(err)}
}

// kept reports whether err is an *emit.UndeliveredError whose events all
// stay in the outbox.
func kept(err error) bool {
	var ue *emit.UndeliveredError
	return errors.As(err, &ue) && ue.AllKept()
}

// newLogger is the logger the flags ask for (validate checked them).
func newLogger(stderr io.Writer, n natsFlags) *slog.Logger {
	log, err := n.logs.New(stderr)
	if err != nil {
		return slog.New(slog.NewTextHandler(stderr, nil))
	}
	return log
}
