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
	fs.StringVar(&f.truthFile, "truth", "", "write the fake provider's ground truth as JSON to this `file`")
	fs.BoolVar(&f.json, "json", false, "print the summary as JSON")
	fs.DurationVar(&f.progress, "progress", time.Second, "interval of the progress lines on stderr; 0 turns them off")
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, usageErr("simulate takes no arguments, got %q", fs.Args())
	}
	if err := f.nats.validate(); err != nil {
		return nil, err
	}
	// The fleet takes 0 for its default; on the command line it is a mistake.
	for _, c := range []struct {
		name string
		v    int
	}{{"--agents", f.cfg.Agents}, {"--sessions", f.cfg.Sessions}, {"--calls", f.cfg.CallsPerSession}} {
		if c.v < 1 {
			return nil, usageErr("%s: %d must be at least 1", c.name, c.v)
		}
	}
	if f.cfg.Policy.AttemptTimeout <= 0 {
		return nil, usageErr("--attempt-timeout: %s must be positive", f.cfg.Policy.AttemptTimeout)
	}
	if f.progress < 0 {
		return nil, usageErr("--progress: %s must not be negative", f.progress)
	}
	f.cfg.Providers = nil
	for p := range strings.SplitSeq(f.providers, ",") {
		if p = strings.TrimSpace(p); p != "" {
			f.cfg.Providers = append(f.cfg.Providers, p)
		}
	}
	if f.cfg.RunID == "" {
		f.cfg.RunID = randomRunID()
	}
	// Validate the fleet's config before connecting, with a stand-in sink.
	probe := f.cfg
	probe.Sink = discardSink{}
	if _, err := sim.New(probe); err != nil {
		return nil, usageErr("%s", flagName(err))
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
		"Policy": "--max-retries / --attempt-timeout",
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
	Truth       truthSummary     `json:"truth"`
	TruthFile   string           `json:"truth_file,omitempty"`
	Errors      []string         `json:"errors,omitempty"`
}

// eventsSummary is what the publisher did with the events.
type eventsSummary struct {
	Enqueued    uint64 `json:"enqueued"`
	Acked       uint64 `json:"acked"`
	Duplicates  uint64 `json:"duplicates"`
	Retries     uint64 `json:"retries"`
	Undelivered uint64 `json:"undelivered"`
}

func eventsOf(st emit.Stats) eventsSummary {
	return eventsSummary{Enqueued: st.Enqueued, Acked: st.Acked, Duplicates: st.Duplicates, Retries: st.Retries, Undelivered: st.Undelivered}
}

// truthSummary is the part of the ground truth the summary shows.
type truthSummary struct {
	fakeprovider.Tally
	Overhead events.Usage `json:"overhead"`
}

func runSimulate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseSimulate(args, stderr)
	if err != nil {
		return err
	}
	logger := newLogger(stderr, f.nats)
	conn, err := connect(ctx, f.nats, logger)
	if err != nil {
		return err
	}
	cfg := f.cfg
	cfg.Sink = conn.pub
	cfg.Logger = logger
	fleet, err := sim.New(cfg)
	if err != nil {
		_, _ = conn.close(ctx)
		return err
	}

	stopProgress := startProgress(f.progress, stderr, fleet, conn.pub)
	res, runErr := fleet.Run(ctx)
	stopProgress()
	stats, closeErr := conn.close(ctx)
	if res == nil {
		return runErr
	}

	sum := simulateSummary{
		RunID: cfg.RunID, Seed: cfg.Seed, Agents: cfg.Agents, Sessions: cfg.Sessions,
		Calls: fleet.CallsTotal(), Mix: cfg.Mix, ElapsedMS: res.Elapsed.Milliseconds(),
		Interrupted: runErr != nil, Fleet: res.Counts, Events: eventsOf(stats),
		Truth: truthSummary{Tally: res.Truth.Total, Overhead: res.Truth.Total.Overhead()},
	}
	if closeErr != nil {
		sum.Errors = append(sum.Errors, closeErr.Error())
	}
	if f.truthFile != "" {
		if err := writeJSONFile(f.truthFile, res.Truth); err != nil {
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
		printSimulateSummary(stdout, &sum)
	}

	switch {
	case stats.Undelivered > 0 || closeErr != nil:
		return failed(fmt.Errorf("%d event(s) undelivered: %v", stats.Undelivered, closeErr))
	case res.Counts.SinkErrors > 0:
		return failed(fmt.Errorf("%d event(s) refused by the publisher", res.Counts.SinkErrors))
	case len(sum.Errors) > 0:
		return failed(errors.New(strings.Join(sum.Errors, "; ")))
	case runErr != nil:
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
	t := s.Truth
	fmt.Fprintf(w, "truth      %d requests, %d attempts (%s)\n", t.Requests, t.Attempts, formatCounts(faultCounts(t.Outcomes)))
	fmt.Fprintf(w, "  usage    in %d, out %d (cache read %d, cache write %d)\n",
		t.Usage.InputTokens, t.Usage.OutputTokens, t.Usage.CacheReadInputTokens, t.Usage.CacheCreationInputTokens)
	fmt.Fprintf(w, "  billed   in %d, out %d (cache read %d, cache write %d)\n",
		t.Billed.InputTokens, t.Billed.OutputTokens, t.Billed.CacheReadInputTokens, t.Billed.CacheCreationInputTokens)
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
