package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/bench"
	"github.com/agentledger/ledger/internal/embedded"
	"github.com/agentledger/ledger/internal/emit"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/topology"
)

// Targets of the performance issue.
const (
	targetRatio        = 0.5
	targetPublishRate  = 150_000
	targetPeakRSSMiB   = 256
	targetMiddlewareNs = 2000
	targetAllocs       = 15
)

// childRun is a child's result plus what the parent measured of it.
type childRun struct {
	childResult
	PeakRSSBytes      uint64 `json:"peak_rss_bytes"`
	RusageMaxRSSBytes uint64 `json:"rusage_maxrss_bytes"`
}

// workloadResult is one workload's row.
type workloadResult struct {
	Spec        bench.Spec `json:"spec"`
	Events      int        `json:"events"`
	PublishRate float64    `json:"publish_rate"`
	PublishSecs float64    `json:"publish_seconds"`
	Raw         childRun   `json:"raw_consume"`
	// Aggregator is the catch-up that built the live ledger (the first
	// with every feature on); CatchUpRate is the median rate of the
	// catch-ups with every feature on over the rounds, the figure Ratio
	// (CatchUpRate / Raw.Rate) and the comparisons use.
	Aggregator  childRun `json:"aggregator"`
	CatchUpRate float64  `json:"catch_up_rate"`
	Ratio       float64  `json:"ratio"`
	// Features compares the catch-up with and without each feature
	// (features.go), over interleaved rounds on the same stream.
	Features []featureResult `json:"features"`
	// Verify is the aggregator verify command of the ledger the aggregator
	// built, as it ships; Rebuild is aggregator rebuild of it (Rate: the
	// projection phase). VerifyVsAggregator is verify's rate over the
	// aggregator's catch-up rate.
	Verify             childRun `json:"verify"`
	Rebuild            childRun `json:"rebuild"`
	VerifyRatio        float64  `json:"verify_ratio"`
	VerifyVsAggregator float64  `json:"verify_vs_aggregator"`
	RebuildRatio       float64  `json:"rebuild_ratio"`
	// Durable is the same workload published and caught up on a server
	// with sync_interval always (the durable default), in the same run;
	// the rest of the row is on the server's own default (an fsync every
	// 2 minutes, the old default). Nil with --durable=false.
	Durable *durableResult `json:"durable,omitempty"`
}

// durableResult is the publish and catch-up rates of a workload on a
// server that fsyncs every write.
type durableResult struct {
	PublishRate float64  `json:"publish_rate"`
	Aggregator  childRun `json:"aggregator"`
	// CatchUpVsOld and PublishVsOld are the durable rates over the old
	// default's.
	CatchUpVsOld float64 `json:"catch_up_vs_old"`
	PublishVsOld float64 `json:"publish_vs_old"`
}

// runDurable publishes spec on a server with sync_interval always and
// measures the aggregator's catch-up there.
func runDurable(ctx context.Context, cfg config, spec bench.Spec) (*durableResult, error) {
	b, err := startBenchServer(true)
	if err != nil {
		return nil, err
	}
	defer b.close()
	n, elapsed, last, err := b.publish(ctx, cfg, spec, "")
	if err != nil {
		return nil, err
	}
	d := &durableResult{PublishRate: float64(n) / elapsed.Seconds()}
	if d.Aggregator, err = runChildProcess(ctx, cfg, spec.Name+"-durable", childAggregate, b.srv.URL(), last); err != nil {
		return nil, err
	}
	return d, nil
}

type results struct {
	Started    time.Time          `json:"started"`
	Machine    machine            `json:"machine"`
	Config     config             `json:"config"`
	RawMethod  string             `json:"raw_consume_method"`
	Workloads  []workloadResult   `json:"workloads"`
	Middleware []middlewareResult `json:"middleware"`
	Gateway    *gatewayResult     `json:"gateway,omitempty"`
	Fleet      *fleetResult       `json:"fleet,omitempty"`
	Upload     *uploadResult      `json:"upload_flood,omitempty"`
	Targets    []check            `json:"targets"`
}

// run runs the parts cfg selects and writes their results.
func run(ctx context.Context, cfg config) error {
	res := results{Started: time.Now().UTC(), Machine: describeMachine(), Config: cfg,
		RawMethod: "ordered consumer (as the aggregator), PullMaxMessages 20000, no acks; events.Decode of every event"}
	if !cfg.only() {
		if err := runCore(ctx, cfg, &res); err != nil {
			return err
		}
	}
	var err error
	if cfg.runs(cfg.Gateway) {
		if res.Gateway, err = benchGateway(ctx, cfg); err != nil {
			return err
		}
	}
	if cfg.runs(cfg.Fleet) {
		if res.Fleet, err = fleetHeadline(ctx, cfg); err != nil {
			return err
		}
	}
	if cfg.runs(cfg.Upload) {
		if res.Upload, err = benchUpload(ctx, cfg); err != nil {
			return err
		}
	}
	res.Targets = evaluate(res)
	printGateway(os.Stdout, res.Gateway)
	printUpload(os.Stdout, res.Upload)
	printTable(os.Stdout, res)
	return writeResults(cfg.Out, res)
}

// runCore runs the workloads (publish, consume, catch-up, rebuild,
// verify) and the middleware's benchmarks.
func runCore(ctx context.Context, cfg config, res *results) error {
	bin, cleanup, err := aggregatorBinary(ctx, cfg)
	if err != nil {
		return err
	}
	defer cleanup()
	cfg.Aggregator = bin
	specs := map[string]bench.Spec{}
	for _, s := range bench.Standard(cfg.Scale) {
		if cfg.Events > 0 {
			s = resize(s, cfg.Events)
		}
		s, err := s.WithLabels(cfg.Labels)
		if err != nil {
			return err
		}
		specs[s.Name] = s
	}
	for _, name := range cfg.Workloads {
		fmt.Fprintf(os.Stderr, "workload %s: %+v\n", name, specs[name])
		w, err := runWorkload(ctx, cfg, specs[name])
		if err != nil {
			return fmt.Errorf("workload %s: %w", name, err)
		}
		res.Workloads = append(res.Workloads, w)
	}
	fmt.Fprintln(os.Stderr, "middleware benchmarks")
	res.Middleware, err = benchMiddleware(ctx)
	return err
}

// resize gives s exactly events events, scaling sessions and requests in
// proportion.
func resize(s bench.Spec, n int) bench.Spec {
	f := float64(n) / float64(s.Events)
	s.Sessions = max(1, int(float64(s.Sessions)*f))
	if s.Requests > 0 {
		per := s.Events / s.Requests
		s.Requests = max(1, n/per)
		n = s.Requests * per
	}
	s.Events = n
	return s
}

// benchServer is an embedded server with file storage in a temp dir, and
// a connection to it.
type benchServer struct {
	srv *embedded.Server
	nc  *nats.Conn
	js  jetstream.JetStream
	dir string
}

// startBenchServer starts a server: with sync_interval always when
// durable (the embedded server's default since issue 15), else with the
// server's own default (an fsync every 2 minutes, the old default).
func startBenchServer(durable bool) (*benchServer, error) {
	dir, err := os.MkdirTemp("", "ledger-bench-")
	if err != nil {
		return nil, err
	}
	b := &benchServer{dir: dir}
	b.srv, err = embedded.Start(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true, SyncAlways: durable})
	if err == nil {
		b.nc, err = nats.Connect(b.srv.URL())
	}
	if err == nil {
		b.js, err = jetstream.New(b.nc)
	}
	if err != nil {
		b.close()
		return nil, err
	}
	return b, nil
}

func (b *benchServer) close() {
	if b.nc != nil {
		b.nc.Close()
	}
	if b.srv != nil {
		b.srv.Shutdown()
	}
	_ = os.RemoveAll(b.dir)
}

// publish publishes the workload with emit's Publisher, generation
// included, up to Close (every event acknowledged), and returns how many
// events, in how long, and the stream's last sequence.
func (b *benchServer) publish(ctx context.Context, cfg config, spec bench.Spec, profile string) (n int, elapsed time.Duration, last uint64, err error) {
	stream, err := topology.EnsureAttempts(ctx, b.js, topology.Config{})
	if err != nil {
		return 0, 0, 0, err
	}
	pub, err := emit.New(b.js)
	if err != nil {
		return 0, 0, 0, err
	}
	stopProfile := func() {}
	if profile != "" {
		if stopProfile, err = startCPUProfile(profile); err != nil {
			return 0, 0, 0, err
		}
	}
	start := time.Now()
	genErr := bench.Generate(spec, cfg.Seed, func(ev *events.Attempt) error {
		n++
		return pub.Publish(ctx, ev)
	})
	stats, closeErr := pub.Close(ctx)
	elapsed = time.Since(start)
	stopProfile()
	if genErr != nil {
		return 0, 0, 0, fmt.Errorf("publish: %w", genErr)
	}
	if closeErr != nil {
		return 0, 0, 0, fmt.Errorf("publish: %w", closeErr)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return 0, 0, 0, err
	}
	if info.State.Msgs != uint64(n) {
		return 0, 0, 0, fmt.Errorf("stream holds %d events, %d published (emit stats %+v)", info.State.Msgs, n, stats)
	}
	return n, elapsed, info.State.LastSeq, nil
}

func runWorkload(ctx context.Context, cfg config, spec bench.Spec) (workloadResult, error) {
	w := workloadResult{Spec: spec}
	b, err := startBenchServer(false)
	if err != nil {
		return w, err
	}
	defer b.close()
	profile := ""
	if cfg.Profile != "" {
		profile = filepath.Join(cfg.Profile, spec.Name+"-publish-cpu.pprof")
	}
	n, elapsed, last, err := b.publish(ctx, cfg, spec, profile)
	if err != nil {
		return w, err
	}
	w.Events, w.PublishSecs, w.PublishRate = n, elapsed.Seconds(), float64(n)/elapsed.Seconds()
	url := b.srv.URL()

	if w.Raw, err = runChildProcess(ctx, cfg, spec.Name, childRaw, url, last); err != nil {
		return w, err
	}
	if w.Aggregator, w.CatchUpRate, w.Features, err = catchUps(ctx, cfg, b.js, spec.Name, url, last); err != nil {
		return w, err
	}
	if cfg.Durable {
		if w.Durable, err = runDurable(ctx, cfg, spec); err != nil {
			return w, fmt.Errorf("durable: %w", err)
		}
		w.Durable.CatchUpVsOld = w.Durable.Aggregator.Rate / w.CatchUpRate
		w.Durable.PublishVsOld = w.Durable.PublishRate / w.PublishRate
	}
	w.Ratio = w.CatchUpRate / w.Raw.Rate
	if w.Verify, err = runVerifyCommand(ctx, cfg, url, last); err != nil {
		return w, err
	}
	if w.Rebuild, err = runChildProcess(ctx, cfg, spec.Name, childRebuild, url, last); err != nil {
		return w, err
	}
	w.VerifyRatio, w.RebuildRatio = w.Verify.Rate/w.Raw.Rate, w.Rebuild.Rate/w.Raw.Rate
	w.VerifyVsAggregator = w.Verify.Rate / w.CatchUpRate
	return w, nil
}

// runChildProcess re-executes this binary with a hidden subcommand (and
// extra, its flags) and reads its JSON result and peak RSS.
func runChildProcess(ctx context.Context, cfg config, workload, kind, url string, last uint64, extra ...string) (childRun, error) {
	self, err := os.Executable()
	if err != nil {
		return childRun{}, err
	}
	args := []string{kind, "--nats-url", url, "--last", strconv.FormatUint(last, 10), "--batch", strconv.Itoa(cfg.Batch),
		"--lease-ttl", cfg.LeaseTTL.String()}
	args = append(args, extra...)
	if cfg.Profile != "" {
		prefix := filepath.Join(cfg.Profile, workload+"-"+kind+strings.ReplaceAll(strings.Join(append([]string{""}, extra...), "-"), "--", ""))
		args = append(args, "--profile", prefix)
		stop, err := startCPUProfile(prefix + "-server-cpu.pprof")
		if err != nil {
			return childRun{}, err
		}
		defer stop()
	}
	cmd := exec.CommandContext(ctx, self, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return childRun{}, fmt.Errorf("%s child: %w: %s", kind, err, errOut.String())
	}
	var r childRun
	if err := json.Unmarshal(out.Bytes(), &r.childResult); err != nil {
		return childRun{}, fmt.Errorf("%s child: reading its result %q: %w", kind, out.String(), err)
	}
	// The child's own high-water mark: the rusage Maxrss of a child
	// started by Go includes the parent's RSS at the fork (os/exec forks
	// with CLONE_VM), which here holds the embedded server's memory. The
	// rusage figure is the fallback where /proc is missing.
	r.PeakRSSBytes = r.VmHWMBytes
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.RusageMaxRSSBytes = uint64(ru.Maxrss) * 1024 // KiB on Linux
		if r.PeakRSSBytes == 0 {
			r.PeakRSSBytes = r.RusageMaxRSSBytes
		}
	}
	return r, nil
}

func writeResults(dir string, res results) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	name := filepath.Join(dir, res.Started.Format("20060102T150405Z")+".json")
	if err := os.WriteFile(name, data, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "latest.json"), data, 0o644); err != nil {
		return err
	}
	fmt.Printf("\nresults written to %s and %s\n", name, filepath.Join(dir, "latest.json"))
	return nil
}
