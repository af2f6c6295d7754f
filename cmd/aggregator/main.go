// Command aggregator projects the attempt stream LEDGER_ATTEMPTS into the
// usage ledger (KV buckets ledger_requests and ledger_sessions) and reports
// on it.
//
//	aggregator [run] [flags]      project events until SIGINT/SIGTERM
//	aggregator report [flags]     print the ledger per session
//	aggregator report --by DIMS   answer by model, provider, label:KEY, hour, day (the rollups), session or request
//	aggregator wait [flags]       wait until the ledger has caught up
//	aggregator rebuild [flags]    rebuild the ledger from the stream, live
//	aggregator verify [flags]     compare the live ledger with a recomputation
//	aggregator prices [flags]     list the price catalogs (the ledger's, the current one)
//	aggregator prices load FILE   store a price catalog and make it current
//
// Every subcommand takes the nats CLI's connection flags (--nats-url,
// --creds, --nkey, --tls-ca, --tls-cert, --tls-key, --context, and their
// NATS_* environment variables) and the logging flags (--log-format text
// or json, --log-level). When no server is named anywhere, it starts an
// embedded NATS server from nats.conf (JetStream, store under ./data,
// listening on 127.0.0.1:4222 so local publishers can connect).
//
// Exit status, the same for every subcommand and for the publisher: 0 ok;
// 1 the check failed (verify found drift, wait timed out, report found no
// such session); 2 a usage or runtime error (bad flags, NATS unreachable
// or refusing the credentials, an interrupted verify or rebuild, a verify
// during which the client dropped messages, a gap in the stream). run
// stopped by SIGINT or SIGTERM exits 0: stopping is how it ends.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/agentledger/ledger/internal/cli"
	"github.com/agentledger/ledger/internal/connect"
	"github.com/agentledger/ledger/internal/embedded"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/logflag"
	"github.com/agentledger/ledger/internal/monitor"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/progress"
	"github.com/agentledger/ledger/internal/projection"
	"github.com/agentledger/ledger/internal/replay"
	"github.com/agentledger/ledger/internal/report"
	"github.com/agentledger/ledger/internal/topology"
)

func main() {
	cli.Main(func(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
		return command(ctx, args, stdout, stderr)
	})
}

const usage = `usage: aggregator [run|report|wait|rebuild|verify|prices] [flags]

  run     project LEDGER_ATTEMPTS into the ledger until SIGINT/SIGTERM (default)
  report  print the ledger per session: usage, billed, retry overhead
          (--at TIME / --at-seq N: as it stood then, recomputed from the stream);
          --by model|provider|label:KEY|hour|day (combinable, e.g. label:team,day)
          answers from the rollups, with --since/--until, --top N,
          --sort overhead|billed|cost|requests, --json or --csv; --by session
          reads the session records, --by request scans every request record
  wait    wait until the ledger has applied every event in the stream
  rebuild rebuild the ledger from the whole stream under this code, live
          (--accept-loss: from what the stream still holds, recording the loss)
  verify  recompute the ledger from the stream and compare it with the live
          one (exit 0: identical, 1: drift, 2: error or could not compare,
          say the client dropped messages; a loaded price catalog that
          changes recorded prices shows as a drift in money)
  prices  list the price catalogs in ledger_prices: the one the ledger
          prices with and the current one; 'prices load FILE' stores a
          catalog and makes it current (the ledger adopts it by a rebuild)

Every command takes the connection flags --nats-url, --creds, --nkey,
--tls-ca, --tls-cert, --tls-key and --context (or $NATS_URL, $NATS_CREDS,
$NATS_NKEY, $NATS_CA, $NATS_CERT, $NATS_KEY, $NATS_CONTEXT; with no server
named, an embedded one starts from nats.conf), and --log-format text|json.
Exit status: 0 ok, 1 the check failed, 2 usage or runtime error.

Run 'aggregator <command> -h' for the flags of a command.
`

func command(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := "run"
	switch {
	case len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help"):
		cmd = "help"
	case len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-':
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
	case "prices":
		err = pricesCmd(ctx, args, stdout, stderr)
	case "help":
		fmt.Fprint(stdout, usage)
		return cli.ExitOK
	default:
		fmt.Fprintf(stderr, "aggregator: unknown command %q\n%s", cmd, usage)
		return cli.ExitUsage
	}
	return cli.Report("aggregator", stderr, err)
}

// connFlags are the flags every subcommand shares: the nats CLI's
// connection flags, the embedded server's, and the logging flags.
type connFlags struct {
	conn             connect.Options
	config, storeDir string
	serverLogs       bool
	logs             logflag.Flags
	stderr           io.Writer
	log              *slog.Logger // made by logger
}

func (c *connFlags) register(fs *flag.FlagSet) {
	connect.RegisterFlags(fs, &c.conn)
	fs.StringVar(&c.config, "config", "nats.conf", "nats-server config of the embedded server, started when no server is named (no --nats-url, $NATS_URL or --context)")
	fs.StringVar(&c.storeDir, "store-dir", "", "override the embedded server's JetStream store directory")
	fs.BoolVar(&c.serverLogs, "server-logs", false, "let the embedded server log to stderr")
	c.logs.Register(fs, "info")
	c.stderr = fs.Output()
}

// logger is the logger the logging flags ask for.
func (c *connFlags) logger() (*slog.Logger, error) {
	if c.log == nil {
		log, err := c.logs.New(c.stderr)
		if err != nil {
			return nil, err
		}
		c.log = log
	}
	return c.log, nil
}

func (c *connFlags) open(name string) (*connect.Conn, error) {
	log, err := c.logger()
	if err != nil {
		return nil, err
	}
	o := c.conn
	o.FromEnv(os.Getenv)
	o.Name, o.Logger = name, log
	o.Embed = func() (connect.Embedded, error) { return embedded.FromConfig(c.config, c.storeDir, c.serverLogs) }
	return connect.Open(o)
}

// guard makes ctx end as soon as the server refuses a permission on conn,
// and, at the end (unguard, deferred), reports that refusal, which names
// the subject, in place of *errp, its mere consequence.
func guard(ctx context.Context, conn *connect.Conn, errp *error) (context.Context, func()) {
	gctx, cancel := conn.Guard(ctx)
	return gctx, func() {
		cancel()
		*errp = conn.Explain(*errp)
	}
}

func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("aggregator "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

func runCmd(ctx context.Context, args []string, stderr io.Writer) (err error) {
	fs := newFlagSet("run", stderr)
	var cf connFlags
	cf.register(fs)
	batch := fs.Int("batch", projection.DefaultBatchSize, "most events applied per batch, 1 to 100000; the default is the library's, as benchmarked")
	instance := fs.String("instance", "", "instance ID for the lease (default: a new ULID per process)")
	leaseTTL := fs.Duration("lease-ttl", 10*time.Second, "how long a silent instance keeps the lease")
	dupWindow := fs.Duration("duplicate-window", 0, "duplicate window of LEDGER_ATTEMPTS when this process creates it (0: the default, 2m); warns when the existing stream's differs")
	replicas := fs.Int("replicas", 0, "replicas of the streams and buckets this process creates, 1 to 5 (0: the default, 1); warns when existing ones differ")
	metricsAddr := fs.String("metrics-addr", "", "serve /metrics, /healthz and /readyz on this address, e.g. 127.0.0.1:9464 (default: off)")
	metricLabels := fs.String("metric-labels", "", fmt.Sprintf("request label keys that become labels of the usage metrics, e.g. team,user (at most %d; default: none)", monitor.MaxMetricLabels))
	metricLabelValues := fs.Int("metric-label-values", monitor.DefaultMetricLabelValues, "most distinct values each --metric-labels key keeps; the requests of others are counted under "+monitor.OverflowValue)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	usageOpts := monitor.UsageOptions{Labels: monitor.ParseMetricLabels(*metricLabels), MaxValues: *metricLabelValues}
	if err := usageOpts.Validate(); err != nil {
		return err
	}
	if len(usageOpts.Labels) > 0 && *metricsAddr == "" {
		return cli.Usagef("--metric-labels: the usage metrics are served only with --metrics-addr")
	}
	log, err := cf.logger()
	if err != nil {
		return err
	}
	limitMemory()
	var ln net.Listener
	if *metricsAddr != "" {
		if ln, err = monitor.Listen(*metricsAddr); err != nil {
			return err
		}
		defer ln.Close()
	}
	conn, err := cf.open("ledger-aggregator")
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, unguard := guard(ctx, conn, &err)
	defer unguard()
	if conn.Embedded != nil {
		log.Info("started embedded NATS server", "url", conn.Embedded.URL(), "config", cf.config)
	}
	topo := topology.Config{DuplicateWindow: *dupWindow, Replicas: *replicas}
	warnTopology(ctx, conn, topo, log)
	return runAggregator(ctx, conn, projection.Config{
		Topology:   topo,
		BatchSize:  *batch,
		InstanceID: *instance,
		LeaseTTL:   *leaseTTL,
	}, ln, usageOpts, log)
}

// runAggregator runs the aggregator, and its metrics server (with the
// usage series' labels uo) when ln is set, until ctx ends.
func runAggregator(ctx context.Context, conn *connect.Conn, cfg projection.Config, ln net.Listener, uo monitor.UsageOptions, log *slog.Logger) error {
	cfg.JS, cfg.Logger = conn.JS, log
	var mon *monitor.Metrics
	var lateSrc lateSource
	if ln != nil {
		var err error
		if mon, err = monitor.NewMetrics(&lateSrc, uo); err != nil {
			return err
		}
		cfg.Observer = mon
	}
	agg, err := projection.New(cfg)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	mctx, stopMonitor := context.WithCancel(ctx)
	defer func() {
		stopMonitor()
		wg.Wait()
	}()
	if mon != nil {
		lateSrc.Source = agg
		srv := &monitor.Server{Metrics: mon, Src: agg, NC: conn.NC, JS: conn.JS, Log: log}
		wg.Go(func() {
			if err := srv.Serve(mctx, ln); err != nil {
				log.Error("metrics server stopped", "err", err)
			}
		})
		log.Info("serving metrics", "addr", ln.Addr().String(), "paths", "/metrics /healthz /readyz")
	}
	log.Info("aggregator starting", "nats", conn.URL())
	err = agg.Run(ctx)
	st := agg.Stats()
	log.Info("aggregator stopped", "applied_seq", agg.Applied(), "events", st.Events, "rejected", st.Rejected, "batches", st.Batches)
	return err
}

// lateSource is the aggregator the metrics read, set once it exists.
type lateSource struct{ monitor.Source }

// warnTopology logs a warning for every setting of an existing stream or
// bucket that differs from what this process asks for: JetStream keeps
// the existing settings.
func warnTopology(ctx context.Context, conn *connect.Conn, want topology.Config, log *slog.Logger) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	diffs, err := topology.Check(cctx, conn.JS, want, names.RequestsBucket, names.SessionsBucket, names.StateBucket, names.RollupsBucket)
	if err != nil {
		log.Warn("could not compare the existing streams and buckets with the settings asked for", "err", err)
	}
	topology.Warn(log, diffs)
}

func reportCmd(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlagSet("report", stderr)
	var cf connFlags
	cf.register(fs)
	session := fs.String("session", "", "report only this session")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	at := fs.String("at", "", "the ledger as it stood at this RFC 3339 time, recomputed from the stream")
	atSeq := fs.Uint64("at-seq", 0, "the ledger as it stood at this stream sequence, recomputed from the stream")
	var qf queryFlags
	qf.register(fs)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	var q report.Query
	if qf.by != "" {
		if *session != "" || *at != "" || *atSeq != 0 {
			return fmt.Errorf("--by: not with --session, --at or --at-seq (the rollups are the live ledger's; --by session gives every session)")
		}
		if q, err = qf.query(*asJSON); err != nil {
			return err
		}
	} else if err := qf.withoutBy(); err != nil {
		return err
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
	ctx, unguard := guard(ctx, conn, &err)
	defer unguard()
	if q.By != nil {
		return answer(ctx, conn, q, *asJSON, qf.csv, stdout, stderr)
	}
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
			return cli.Failed(err)
		}
		return err
	}
	if point == (replay.Point{}) {
		noteLoss(ctx, conn, stderr)
	}
	if *asJSON {
		return report.WriteJSON(stdout, l)
	}
	return report.WriteTable(stdout, l)
}

// queryFlags are report's flags of a query by dimension and time.
type queryFlags struct {
	by, since, until, sort string
	top                    int
	csv                    bool
}

func (f *queryFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.by, "by", "", "group by these dimensions, separated by commas: model, provider, label:KEY, hour, day (from the rollups), session (the session records, whole life), request (scans every request record); e.g. label:team,day")
	fs.StringVar(&f.since, "since", "", "with --by: only hours from this one on (inclusive): a date (midnight UTC) or an RFC 3339 time on a whole UTC hour")
	fs.StringVar(&f.until, "until", "", "with --by: only hours before this one (exclusive): a date (midnight UTC) or an RFC 3339 time on a whole UTC hour")
	fs.IntVar(&f.top, "top", 0, "with --by: only the first N rows of the order (0: every row)")
	fs.StringVar(&f.sort, "sort", "", "with --by: most first by overhead ($, then tokens), billed (tokens), cost (billed $) or requests (default: by the dimensions)")
	fs.BoolVar(&f.csv, "csv", false, "with --by: print CSV instead of a table")
}

// withoutBy refuses the flags that need --by.
func (f *queryFlags) withoutBy() error {
	for _, g := range []struct {
		name string
		set  bool
	}{{"--since", f.since != ""}, {"--until", f.until != ""}, {"--top", f.top != 0}, {"--sort", f.sort != ""}, {"--csv", f.csv}} {
		if g.set {
			return fmt.Errorf("%s: only with --by (without it, the report is the table of every session)", g.name)
		}
	}
	return nil
}

// query is the report.Query of the flags.
func (f *queryFlags) query(asJSON bool) (report.Query, error) {
	var q report.Query
	if asJSON && f.csv {
		return q, fmt.Errorf("--json and --csv: give one of them")
	}
	var err error
	if q.By, err = report.ParseBy(f.by); err != nil {
		return q, err
	}
	if f.since != "" {
		if q.Since, err = report.ParseTime("--since", f.since); err != nil {
			return q, err
		}
	}
	if f.until != "" {
		if q.Until, err = report.ParseTime("--until", f.until); err != nil {
			return q, err
		}
	}
	if q.Sort, err = report.ParseSort(f.sort); err != nil {
		return q, err
	}
	q.Top = f.top
	return q, q.Validate()
}

// answer answers a report --by q.
func answer(ctx context.Context, conn *connect.Conn, q report.Query, asJSON, asCSV bool, stdout, stderr io.Writer) error {
	r, err := report.Answer(ctx, conn.JS, q)
	if err != nil {
		return err
	}
	noteLoss(ctx, conn, stderr)
	switch {
	case asJSON:
		return report.WriteRowsJSON(stdout, r)
	case asCSV:
		return report.WriteCSV(stdout, r)
	}
	return report.WriteRowsTable(stdout, r)
}

// noteLoss says on stderr which events the live ledger was rebuilt
// without (aggregator rebuild --accept-loss): the totals leave out their
// usage.
func noteLoss(ctx context.Context, conn *connect.Conn, stderr io.Writer) {
	loss, err := projection.ReadLoss(ctx, conn.JS)
	if err != nil {
		fmt.Fprintf(stderr, "note: could not read the loss record: %v\n", err)
		return
	}
	for _, r := range loss {
		fmt.Fprintf(stderr, "note: the ledger was rebuilt without events %d to %d of %s, which the stream had lost (aggregator rebuild --accept-loss, %s, %s): their usage is not in these totals\n",
			r.From, r.To, names.AttemptsStream, r.RecordedAt.Format(time.RFC3339), r.By)
	}
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
	r, err := replay.Ledger(ctx, conn.JS, p, replay.Options{Progress: meter.Update})
	meter.Finish()
	if err != nil {
		return nil, err
	}
	if session == "" {
		return &report.Ledger{Sessions: r.Sessions, Total: r.Total, Applied: r.Seq, StreamLast: r.Seq}, nil
	}
	for _, s := range r.Sessions {
		if s.SessionID == session {
			return &report.Ledger{Sessions: []projection.SessionView{s}, Total: s.Totals, Applied: r.Seq, StreamLast: r.Seq}, nil
		}
	}
	return nil, fmt.Errorf("%w: %q at that point", report.ErrNoSession, session)
}

func waitCmd(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlagSet("wait", stderr)
	var cf connFlags
	cf.register(fs)
	timeout := fs.Duration("timeout", time.Minute, "give up after this long (exit 1)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	conn, err := cf.open("ledger-wait")
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, unguard := guard(ctx, conn, &err)
	defer unguard()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	applied, last, err := projection.WaitCaughtUp(ctx, conn.JS, 20*time.Millisecond)
	if errors.Is(err, context.DeadlineExceeded) {
		return cli.Failed(fmt.Errorf("not caught up after %s: applied %d of %d", *timeout, applied, last))
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "caught up: applied through stream sequence %d\n", applied)
	return nil
}
