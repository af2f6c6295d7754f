// Command aggregator projects the attempt stream LEDGER_ATTEMPTS into the
// usage ledger (KV buckets ledger_requests and ledger_sessions) and reports
// on it.
//
//	aggregator [run] [flags]      project events until SIGINT/SIGTERM
//	aggregator report [flags]     print the ledger per session
//	aggregator wait [flags]       wait until the ledger has caught up
//	aggregator rebuild [flags]    rebuild the ledger from the stream, live
//	aggregator verify [flags]     compare the live ledger with a recomputation
//
// Every subcommand connects to --nats-url or NATS_URL; with neither, it
// starts an embedded NATS server from nats.conf (JetStream, store under
// ./data, listening on 127.0.0.1:4222 so local publishers can connect).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/agentledger/ledger/internal/connect"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/progress"
	"github.com/agentledger/ledger/internal/projection"
	"github.com/agentledger/ledger/internal/replay"
	"github.com/agentledger/ledger/internal/report"
	"github.com/agentledger/ledger/internal/topology"
)

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1 // the command ran and the answer is "no" (wait timed out)
	exitUsage = 2 // bad flags, connection or I/O error
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: aggregator [run|report|wait|rebuild|verify] [flags]

  run     project LEDGER_ATTEMPTS into the ledger until SIGINT/SIGTERM (default)
  report  print the ledger per session: usage, billed, retry overhead
          (--at TIME / --at-seq N: as it stood then, recomputed from the stream)
  wait    wait until the ledger has applied every event in the stream
  rebuild rebuild the ledger from the whole stream under this code, live
  verify  recompute the ledger from the stream and compare it with the live
          one (exit 0: identical, 1: drift, 2: error)

Run 'aggregator <command> -h' for the flags of a command.
`

func cli(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := "run"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "run":
		err = runCmd(ctx, args, stderr)
	case "report":
		err = reportCmd(ctx, args, stdout, stderr)
	case "wait":
		err = waitCmd(ctx, args, stdout, stderr)
	case "rebuild":
		err = rebuildCmd(ctx, args, stdout, stderr)
	case "verify":
		err = verifyCmd(ctx, args, stdout, stderr, replay.Options{})
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "aggregator: unknown command %q\n%s", cmd, usage)
		return exitUsage
	}
	var ex exitError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ex):
		if ex.msg != "" {
			fmt.Fprintln(stderr, "aggregator:", ex.msg)
		}
		return ex.code
	default:
		fmt.Fprintln(stderr, "aggregator:", err)
		return exitUsage
	}
}

type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

// connFlags are the flags every subcommand shares.
type connFlags struct {
	url, config, storeDir string
	serverLogs            bool
}

func (c *connFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.url, "nats-url", "", "NATS server URL (default $"+connect.EnvURL+"; with neither, an embedded server from --config)")
	fs.StringVar(&c.config, "config", "nats.conf", "nats-server config of the embedded server")
	fs.StringVar(&c.storeDir, "store-dir", "", "override the embedded server's JetStream store directory")
	fs.BoolVar(&c.serverLogs, "server-logs", false, "let the embedded server log to stderr")
}

func (c *connFlags) open(name string) (*connect.Conn, error) {
	return connect.Open(connect.Options{URL: c.url, EmbedConfig: c.config, StoreDir: c.storeDir, Name: name, ServerLogs: c.serverLogs})
}

func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("aggregator "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

func runCmd(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlagSet("run", stderr)
	var cf connFlags
	cf.register(fs)
	batch := fs.Int("batch", projection.DefaultBatchSize, "most events applied per batch, 1 to 100000; the default is the library's, as benchmarked")
	instance := fs.String("instance", "", "instance ID for the lease (default: a new ULID per process)")
	leaseTTL := fs.Duration("lease-ttl", 10*time.Second, "how long a silent instance keeps the lease")
	dupWindow := fs.Duration("duplicate-window", topology.DefaultDuplicateWindow, "duplicate window of LEDGER_ATTEMPTS when this process creates it")
	replicas := fs.Int("replicas", 1, "replicas of the streams and buckets this process creates")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return exitError{code: exitUsage}
	}
	limitMemory()
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %q is not one of debug, info, warn, error", *logLevel)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	conn, err := cf.open("ledger-aggregator")
	if err != nil {
		return err
	}
	defer conn.Close()
	if conn.Embedded != nil {
		log.Info("started embedded NATS server", "url", conn.Embedded.URL(), "config", cf.config)
	}
	agg, err := projection.New(projection.Config{
		JS:         conn.JS,
		Topology:   topology.Config{DuplicateWindow: *dupWindow, Replicas: *replicas},
		BatchSize:  *batch,
		InstanceID: *instance,
		LeaseTTL:   *leaseTTL,
		Logger:     log,
	})
	if err != nil {
		return err
	}
	log.Info("aggregator starting", "nats", conn.URL())
	err = agg.Run(ctx)
	st := agg.Stats()
	log.Info("aggregator stopped", "applied_seq", agg.Applied(), "events", st.Events, "rejected", st.Rejected, "batches", st.Batches)
	return err
}

func reportCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("report", stderr)
	var cf connFlags
	cf.register(fs)
	session := fs.String("session", "", "report only this session")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	at := fs.String("at", "", "the ledger as it stood at this RFC 3339 time, recomputed from the stream")
	atSeq := fs.Uint64("at-seq", 0, "the ledger as it stood at this stream sequence, recomputed from the stream")
	if err := fs.Parse(args); err != nil {
		return exitError{code: exitUsage}
	}
	var point replay.Point
	if *at != "" {
		t, err := time.Parse(time.RFC3339Nano, *at)
		if err != nil {
			return fmt.Errorf("--at: %q is not an RFC 3339 time such as 2026-12-01T15:04:05Z", *at)
		}
		point.At = t
	}
	point.Seq = *atSeq
	if !point.At.IsZero() && point.Seq != 0 {
		return fmt.Errorf("--at and --at-seq: give one of them, not both")
	}
	conn, err := cf.open("ledger-report")
	if err != nil {
		return err
	}
	defer conn.Close()
	var l *report.Ledger
	if point != (replay.Point{}) {
		l, err = pointInTime(ctx, conn, point, *session, stderr)
	} else {
		l, err = report.Load(ctx, conn.JS, *session)
	}
	if err != nil {
		var fe *events.FieldError
		if errors.As(err, &fe) {
			return fmt.Errorf("--session: %s", fe.Rule)
		}
		if errors.Is(err, report.ErrNoSession) {
			return exitError{code: exitFail, msg: err.Error()}
		}
		return err
	}
	if *asJSON {
		return report.WriteJSON(stdout, l)
	}
	return report.WriteTable(stdout, l)
}

// pointInTime recomputes the ledger at p from the stream, optionally for
// one session only.
func pointInTime(ctx context.Context, conn *connect.Conn, p replay.Point, session string, stderr io.Writer) (*report.Ledger, error) {
	if session != "" {
		if err := events.ValidateID("session", session); err != nil {
			return nil, err
		}
	}
	meter := progress.New(stderr, "report", progress.Options{})
	l, err := replay.Ledger(ctx, conn.JS, p, replay.Options{Progress: meter.Update})
	meter.Finish()
	if err != nil || session == "" {
		return l, err
	}
	for _, s := range l.Sessions {
		if s.SessionID == session {
			return &report.Ledger{Sessions: []projection.SessionView{s}, Total: s.Totals, Applied: l.Applied, StreamLast: l.StreamLast}, nil
		}
	}
	return nil, fmt.Errorf("%w: %q at that point", report.ErrNoSession, session)
}

func waitCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("wait", stderr)
	var cf connFlags
	cf.register(fs)
	timeout := fs.Duration("timeout", time.Minute, "give up after this long (exit 1)")
	if err := fs.Parse(args); err != nil {
		return exitError{code: exitUsage}
	}
	conn, err := cf.open("ledger-wait")
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	applied, last, err := projection.WaitCaughtUp(ctx, conn.JS, 20*time.Millisecond)
	if errors.Is(err, context.DeadlineExceeded) {
		return exitError{code: exitFail, msg: fmt.Sprintf("not caught up after %s: applied %d of %d", *timeout, applied, last)}
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "caught up: applied through stream sequence %d\n", applied)
	return nil
}
