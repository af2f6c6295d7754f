package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentledger/ledger/internal/cli"
	"github.com/agentledger/ledger/internal/emit"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/sim"
	"github.com/agentledger/ledger/internal/sim/fakeprovider"
)

// simulateFlags are the flags of publisher simulate.
type simulateFlags struct {
	nats      natsFlags
	cfg       sim.Config
	providers string
	truthFile string
	json      bool
	progress  time.Duration
	fleet     fleetFlags
	labels    cli.Labels
}

func parseSimulate(args []string, stderr io.Writer) (*simulateFlags, error) {
	f := &simulateFlags{cfg: sim.Config{Policy: sim.Policy()}}
	fs := flag.NewFlagSet("publisher simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: publisher simulate [flags]\n\nRuns a simulated fleet of agents against a fake model provider and publishes every attempt.\n\nFlags:")
		fs.PrintDefaults()
	}
	f.nats.register(fs)
	def := fakeprovider.DefaultMix()
	fs.IntVar(&f.cfg.Agents, "agents", 4, "concurrent agents")
	fs.IntVar(&f.cfg.Sessions, "sessions", 10, "sessions (an agent works through one at a time)")
	fs.IntVar(&f.cfg.CallsPerSession, "calls", 10, "logical calls per session")
	fs.Uint64Var(&f.cfg.Seed, "seed", 1, "seed of every decision of the fake provider")
	fs.StringVar(&f.cfg.RunID, "run-id", "", "prefix of the session and request IDs (default: random, so runs never collide)")
	fs.StringVar(&f.providers, "providers", strings.Join(fakeprovider.Providers(), ","), "comma-separated providers, assigned to sessions round robin")
	registerFaultFlags(fs, &f.cfg.Mix, def)
	fs.IntVar(&f.cfg.Policy.MaxRetries, "max-retries", f.cfg.Policy.MaxRetries, "retries after the first attempt")
	fs.DurationVar(&f.cfg.Policy.AttemptTimeout, "attempt-timeout", f.cfg.Policy.AttemptTimeout, "timeout of each attempt (ends a stalled stream)")
	fs.DurationVar(&f.cfg.Policy.HintCap, "hint-cap", f.cfg.Policy.HintCap, "longest retry-after honoured, and longest wait for rate-limit capacity; a longer one ends the call")
	fs.Var(&f.labels, "labels", "labels of every call: "+cli.LabelsUsage)
	fs.IntVar(&f.cfg.Teams, "teams", 0, "label session i's calls team=team-<i % N>, over --labels, for reports by team; 0: none")
	fs.DurationVar(&f.cfg.Think, "think", 0, "how long each agent waits after a call before the next (its demand); 0: none")
	fs.StringVar(&f.truthFile, "truth", "", "write the fake provider's ground truth as JSON to this `file`")
	fs.BoolVar(&f.json, "json", false, "print the summary as JSON")
	fs.DurationVar(&f.progress, "progress", time.Second, "interval of the progress lines on stderr; 0 turns them off")
	f.fleet.register(fs)
	if err := cli.Parse(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, cli.Usagef("simulate takes no arguments, got %q", fs.Args())
	}
	if err := f.nats.validate(); err != nil {
		return nil, err
	}
	if f.nats.outbox != "" && f.fleet.processes > 1 {
		return nil, cli.Usagef("--outbox: a directory has one owner; it cannot serve --processes %d", f.fleet.processes)
	}
	// The fleet takes 0 for its default; on the command line it is a mistake.
	for _, c := range []struct {
		name string
		v    int
	}{{"--agents", f.cfg.Agents}, {"--sessions", f.cfg.Sessions}, {"--calls", f.cfg.CallsPerSession}} {
		if c.v < 1 {
			return nil, cli.Usagef("%s: %d must be at least 1", c.name, c.v)
		}
	}
	if f.cfg.Policy.AttemptTimeout <= 0 {
		return nil, cli.Usagef("--attempt-timeout: %s must be positive", f.cfg.Policy.AttemptTimeout)
	}
	if f.progress < 0 {
		return nil, cli.Usagef("--progress: %s must not be negative", f.progress)
	}
	if err := f.fleet.validate(&f.cfg); err != nil {
		return nil, err
	}
	f.cfg.Providers = nil
	for p := range strings.SplitSeq(f.providers, ",") {
		if p = strings.TrimSpace(p); p != "" {
			f.cfg.Providers = append(f.cfg.Providers, p)
		}
	}
	f.cfg.Labels = f.labels.L
	if f.cfg.RunID == "" {
		f.cfg.RunID = randomRunID()
	}
	// Validate the fleet's config before connecting, with a stand-in sink.
	probe := f.cfg
	probe.Sink = discardSink{}
	if _, err := sim.New(probe); err != nil {
		return nil, cli.Usagef("%s", flagName(err))
	}
	return f, nil
}

// flagName rewords a sim.ConfigError with the flag that sets the field.
func flagName(err error) string {
	var ce *sim.ConfigError
	if !errors.As(err, &ce) {
		return err.Error()
	}
	names := map[string]string{
		"Agents": "--agents", "Sessions": "--sessions", "CallsPerSession": "--calls", "RunID": "--run-id",
		"Mix":    "fault mix (--rate-limit, --overload, --server-error, --billed-timeout, --bad-request)",
		"Policy": "--max-retries / --attempt-timeout / --hint-cap",
		"Think":  "--think",
		"Labels": "--labels", "Teams": "--teams",
	}
	name, ok := names[ce.Field]
	if !ok && strings.HasPrefix(ce.Field, "Providers") {
		name, ok = "--providers", true
	}
	if !ok {
		return err.Error()
	}
	return name + ": " + err.Error()
}

func randomRunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "sim-" + hex.EncodeToString(b[:])
}

// discardSink stands in for the publisher while the flags are validated.
type discardSink struct{}

func (discardSink) Publish(context.Context, *events.Attempt) error { return nil }

// simulateSummary is the summary of publisher simulate; with --json it is
// printed as it is.
type simulateSummary struct {
	RunID       string           `json:"run_id"`
	Seed        uint64           `json:"seed"`
	Agents      int              `json:"agents"`
	Sessions    int              `json:"sessions"`
	Calls       int64            `json:"calls_planned"`
	Mix         fakeprovider.Mix `json:"mix"`
	ElapsedMS   int64            `json:"elapsed_ms"`
	Interrupted bool             `json:"interrupted"`
	Fleet       sim.Counts       `json:"fleet"`
	Events      eventsSummary    `json:"events"`
	Truth       *truthSummary    `json:"truth,omitempty"` // nil for a worker of a --processes run
	TruthFile   string           `json:"truth_file,omitempty"`
	Errors      []string         `json:"errors,omitempty"`
	// The fleet's limits and processes, and what the provider saw of
	// them (from the truth): attempts it answered 429 (its tier and the
	// fault mix), attempts that reached it during the outage.
	Processes      int                  `json:"processes"`
	FleetLimits    string               `json:"fleet_limits"`
	Tier           *fakeprovider.Tier   `json:"tier,omitempty"`
	Outage         *fakeprovider.Outage `json:"outage,omitempty"`
	WallSeconds    float64              `json:"wall_seconds"`
	RateLimited    int64                `json:"rate_limited"`
	OutageAttempts int64                `json:"outage_attempts"`
}

// fleetFields fills the summary's fleet settings and wall time.
func (s *simulateSummary) fleetFields(f *simulateFlags, wall time.Duration) {
	s.Processes, s.FleetLimits, s.WallSeconds = f.fleet.processes, f.fleet.limits, wall.Seconds()
	if f.cfg.Tier != (fakeprovider.Tier{}) {
		t := f.cfg.Tier
		s.Tier = &t
	}
	if f.cfg.Outage != (fakeprovider.Outage{}) {
		o := f.cfg.Outage
		s.Outage = &o
	}
}

// eventsSummary is what the publisher did with the events.
type eventsSummary struct {
	Enqueued    uint64 `json:"enqueued"`
	Acked       uint64 `json:"acked"`
	Duplicates  uint64 `json:"duplicates"`
	Retries     uint64 `json:"retries"`
	Undelivered uint64 `json:"undelivered"`
	Recovered   uint64 `json:"recovered,omitempty"` // read back from the outbox at start
	Kept        uint64 `json:"kept,omitempty"`      // left in the outbox for the next run
}

func eventsOf(st emit.Stats) eventsSummary {
	return eventsSummary{Enqueued: st.Enqueued, Acked: st.Acked, Duplicates: st.Duplicates, Retries: st.Retries,
		Undelivered: st.Undelivered, Recovered: st.Recovered, Kept: st.Kept}
}

// truthSummary is the part of the ground truth the summary shows.
type truthSummary struct {
	fakeprovider.Tally
	Overhead events.Usage `json:"overhead"`
}

func runSimulate(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	f, err := parseSimulate(args, stderr)
	if err != nil {
		return err
	}
	if f.fleet.parent() {
		return runSimulateParent(ctx, f, args, stdout, stderr)
	}
	logger := newLogger(stderr, f.nats)
	conn, err := connect(ctx, f.nats, logger)
	if err != nil {
		return err
	}
	ctx = conn.ctx
	defer func() { err = conn.explain(err) }()
	cfg := f.cfg
	cfg.Sink = conn.pub
	cfg.Logger = logger
	guards, closeGuards, err := f.fleet.guards(ctx, conn.conn, cfg.RunID, cfg.Policy.AttemptTimeout, logger)
	if err != nil {
		_, _ = conn.close(ctx, logger)
		return &cli.ExitError{Code: cli.ExitUsage, Err: err}
	}
	cfg.Guards = guards
	fleet, err := sim.New(cfg)
	if err != nil {
		closeGuards()
		_, _ = conn.close(ctx, logger)
		return err
	}

	stopProgress := startProgress(f.progress, stderr, fleet, conn.pub)
	res, runErr := fleet.Run(ctx)
	stopProgress()
	closeGuards()
	stats, closeErr := conn.close(ctx, logger)
	if res == nil {
		return runErr
	}

	sum := simulateSummary{
		RunID: cfg.RunID, Seed: cfg.Seed, Agents: cfg.Agents, Sessions: cfg.Sessions,
		Calls: fleet.CallsTotal(), Mix: cfg.Mix, ElapsedMS: res.Elapsed.Milliseconds(),
		Interrupted: runErr != nil, Fleet: res.Counts, Events: eventsOf(stats),
	}
	sum.fleetFields(f, res.Elapsed)
	if closeErr != nil {
		sum.Errors = append(sum.Errors, closeErr.Error())
	}
	return finishSimulate(f, &sum, res.Truth, stdout)
}

// finishSimulate adds the truth (nil for a worker) to the summary, writes
// the truth file, prints the summary and returns the run's error.
func finishSimulate(f *simulateFlags, sum *simulateSummary, truth *fakeprovider.Truth, stdout io.Writer) error {
	if truth != nil {
		sum.Truth = &truthSummary{Tally: truth.Total, Overhead: truth.Total.Overhead()}
		o := truth.Total.Outcomes
		sum.RateLimited = o[fakeprovider.FaultRateLimit] + o[fakeprovider.FaultTierLimit]
		sum.OutageAttempts = o[fakeprovider.FaultOutage]
	}
	if f.truthFile != "" && truth != nil {
		if err := writeJSONFile(f.truthFile, truth); err != nil {
			sum.Errors = append(sum.Errors, err.Error())
		} else {
			sum.TruthFile = f.truthFile
		}
	}
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(sum); err != nil {
			return err
		}
	} else {
		printSimulateSummary(stdout, sum)
	}
	switch {
	case sum.Events.Undelivered > 0:
		return cli.Failed(fmt.Errorf("%d event(s) undelivered: %s", sum.Events.Undelivered, strings.Join(sum.Errors, "; ")))
	case sum.Fleet.SinkErrors > 0:
		return cli.Failed(fmt.Errorf("%d event(s) refused by the publisher", sum.Fleet.SinkErrors))
	case len(sum.Errors) > 0:
		return cli.Failed(errors.New(strings.Join(sum.Errors, "; ")))
	case sum.Interrupted:
		return errInterrupted
	}
	return nil
}

// startProgress prints a progress line to stderr every interval until the
// returned function is called; that function waits for the printer to
// stop. An interval of 0 prints nothing.
func startProgress(interval time.Duration, stderr io.Writer, fleet *sim.Fleet, pub *emit.Publisher) (stop func()) {
	if interval <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				p := fleet.Progress()
				st := pub.Stats()
				fmt.Fprintf(stderr, "progress: calls %d/%d, attempts %d, events acked %d/%d\n",
					p.CallsDone, p.CallsTotal, p.Attempts, st.Acked, st.Enqueued)
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("--truth: %w", err)
	}
	return nil
}

func printSimulateSummary(w io.Writer, s *simulateSummary) {
	status := "done"
	if s.Interrupted {
		status = "interrupted"
	}
	c := s.Fleet
	fmt.Fprintf(w, "run %s (seed %d) %s in %s: %d agents, %d sessions\n",
		s.RunID, s.Seed, status, time.Duration(s.ElapsedMS)*time.Millisecond, s.Agents, s.Sessions)
	fmt.Fprintf(w, "calls      %d of %d: %d succeeded, %d failed\n", c.Calls, s.Calls, c.CallsSucceeded, c.CallsFailed)
	fmt.Fprintf(w, "attempts   %d (%d retries)\n", c.Attempts, c.Retries)
	fmt.Fprintf(w, "outcomes   %s\n", formatCounts(c.Outcomes))
	fmt.Fprintf(w, "events     %d enqueued, %d acked (%d duplicates), %d undelivered\n",
		s.Events.Enqueued, s.Events.Acked, s.Events.Duplicates, s.Events.Undelivered)
	if s.Processes > 1 || s.FleetLimits != limitsNone || s.Tier != nil || s.Outage != nil {
		fmt.Fprintf(w, "fleet      %d process(es), fleet limits %s, %d waits for capacity; wall %.2fs\n",
			s.Processes, s.FleetLimits, c.Waits, s.WallSeconds)
		fmt.Fprintf(w, "provider   %d attempts answered 429, %d attempts during the outage\n", s.RateLimited, s.OutageAttempts)
	}
	t := s.Truth
	if t == nil {
		return
	}
	fmt.Fprintf(w, "truth      %d requests, %d attempts (%s)\n", t.Requests, t.Attempts, formatCounts(faultCounts(t.Outcomes)))
	for _, row := range []struct {
		name string
		u    events.Usage
	}{{"usage   ", t.Usage}, {"billed  ", t.Billed}} {
		fmt.Fprintf(w, "  %s in %d, out %d (cache read %d, cache write %d of which 1h %d, reasoning %d)\n", row.name,
			row.u.InputTokens, row.u.OutputTokens, row.u.CacheReadInputTokens, row.u.CacheCreationInputTokens,
			row.u.CacheCreation1hInputTokens, row.u.ReasoningTokens)
	}
	fmt.Fprintf(w, "  overhead in %d, out %d\n", t.Overhead.InputTokens, t.Overhead.OutputTokens)
	if s.TruthFile != "" {
		fmt.Fprintf(w, "truth written to %s\n", s.TruthFile)
	}
	for _, e := range s.Errors {
		fmt.Fprintf(w, "error: %s\n", e)
	}
}

func faultCounts(m map[fakeprovider.Fault]int64) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[string(k)] = v
	}
	return out
}

// formatCounts writes "a 1, b 2" in key order.
func formatCounts(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
