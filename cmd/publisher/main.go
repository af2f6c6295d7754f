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
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/emit"
	"github.com/agentledger/ledger/internal/topology"
)

// Exit codes.
const (
	exitOK          = 0
	exitFailed      = 1 // undelivered events, invalid input lines
	exitUsage       = 2 // bad flags, NATS unreachable
	exitInterrupted = 130
)

// exitError carries the exit status of a failed run.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

func failed(err error) error { return &exitError{code: exitFailed, err: err} }

// errInterrupted ends a run that a signal stopped.
var errInterrupted = &exitError{code: exitInterrupted, err: errors.New("interrupted")}

// exitCode maps run's error to the process's exit status.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return exitFailed
}

func main() {
	// genai logs every failed stream through the standard logger; the
	// simulator's stalled streams fail on purpose, and its own records go
	// to the slog logger on stderr.
	log.SetOutput(io.Discard)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "publisher:", err)
	}
	os.Exit(exitCode(err))
}

const usage = `usage:
  publisher simulate [flags]          run a simulated fleet, publishing every attempt
  publisher ingest [flags] [FILE|-]   publish JSON-lines events (default: stdin)
Run "publisher <command> -h" for the flags of a command.`

// run dispatches to a subcommand.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return usageErr("no command")
	}
	switch args[0] {
	case "simulate":
		return runSimulate(ctx, args[1:], stdout, stderr)
	case "ingest":
		return runIngest(ctx, args[1:], stdin, stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, usage)
		return nil
	}
	fmt.Fprintln(stderr, usage)
	return usageErr("unknown command %q", args[0])
}

// natsFlags are the connection flags both commands share.
type natsFlags struct {
	url          string
	drainTimeout time.Duration
}

func (n *natsFlags) register(fs *flag.FlagSet) {
	def := os.Getenv("NATS_URL")
	if def == "" {
		def = nats.DefaultURL
	}
	fs.StringVar(&n.url, "nats-url", def, "NATS server URL; $NATS_URL sets the default")
	fs.DurationVar(&n.drainTimeout, "drain-timeout", 30*time.Second, "how long to wait at the end for the stream to acknowledge what was enqueued")
}

func (n *natsFlags) validate() error {
	if n.url == "" {
		return usageErr("--nats-url: must not be empty")
	}
	if n.drainTimeout <= 0 {
		return usageErr("--drain-timeout: %s must be positive", n.drainTimeout)
	}
	return nil
}

// parse parses a command's flags, turning a parse error into a usage error.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &exitError{code: exitUsage, err: err}
	}
	return nil
}

// session is a connection to NATS with the ledger's stream and an emit
// publisher on it. close must be called.
type session struct {
	nc    *nats.Conn
	pub   *emit.Publisher
	drain time.Duration
}

// connect reaches NATS, ensures LEDGER_ATTEMPTS and starts a publisher.
func connect(ctx context.Context, n natsFlags, logger *slog.Logger) (*session, error) {
	nc, err := nats.Connect(n.url, nats.Name("ledger-publisher"), nats.Timeout(5*time.Second), nats.MaxReconnects(-1))
	if err != nil {
		return nil, &exitError{code: exitUsage, err: fmt.Errorf("connecting to %s: %w", n.url, err)}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, &exitError{code: exitUsage, err: fmt.Errorf("jetstream: %w", err)}
	}
	ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := topology.EnsureAttempts(ectx, js, topology.Config{}); err != nil {
		nc.Close()
		return nil, &exitError{code: exitUsage, err: err}
	}
	pub, err := emit.New(js,
		emit.WithEnsureStream(topology.Config{}),
		emit.WithErrorHandler(func(err error) { logger.Warn("publish failed; retrying", slog.Any("error", err)) }),
	)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &session{nc: nc, pub: pub, drain: n.drainTimeout}, nil
}

// close drains the publisher (even when ctx is done: what was enqueued is
// flushed within the drain timeout) and closes the connection.
func (s *session) close(ctx context.Context) (emit.Stats, error) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.drain)
	defer cancel()
	st, err := s.pub.Close(dctx)
	s.nc.Close()
	return st, err
}

func newLogger(stderr io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
