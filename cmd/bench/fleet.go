package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/agentledger/ledger/internal/embedded"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/sim"
	"github.com/agentledger/ledger/internal/sim/fakeprovider"
)

// The fleet headline: publisher simulate with --processes, fleet limits
// off then on, against a tier limit and through an outage.
const (
	fleetProcesses = 8
	fleetThreshold = 5
	fleetCooldown  = time.Second
	fleetOutage    = 4 * time.Second
	fleetTierITPM  = 2_000_000
	// fleetTierRetries and fleetTierHintCap let a call without guards
	// retry 429s until it succeeds (large calls lose the race to small
	// ones many times over: 40 retries left 30 of 320 undone), so that
	// none does the same calls as on; the guards' retry budget still ends
	// calls with fleet limits off.
	fleetTierRetries = 500
	fleetTierHintCap = 10 * time.Second
	// Targets of the fleet issue.
	target429Drop    = 0.9
	targetWallRatio  = 1.1
	fleetSettingsDoc = "8 processes x 2 agents, anthropic, no injected faults but the tier or the outage, defaults of the middleware's guards (breaker 5 failures, retry budget 20 % + 10 per minute) with a 1 s cooldown; tier: 3000 requests and 2,000,000 input tokens a minute (about 34 calls a second), a demand above it"
)

// fleetScenario is one scenario of the headline: the flags of publisher
// simulate besides the common ones, and the --fleet-limits modes it runs
// with.
type fleetScenario struct {
	Name   string   `json:"name"`
	Args   []string `json:"args"`
	Limits []string `json:"limits"`
}

// fleetScenarios are the tier and the outage, their sizes scaled (at
// most to 1). The outage's agents call through all of it: 40 calls each,
// 200 ms apart.
func fleetScenarios(scale float64) []fleetScenario {
	sessions := strconv.Itoa(max(16, int(math.Round(32*math.Min(scale, 1)))))
	return []fleetScenario{
		// none is the middleware without guards, retrying every 429 after
		// its retry-after until the call succeeds: the same calls as on,
		// all done, for the time target.
		{Name: "tier", Args: []string{"--sessions", sessions, "--calls", "10", "--think", "100ms", "--max-retries", strconv.Itoa(fleetTierRetries), "--hint-cap", fleetTierHintCap.String(),
			"--tier-rpm", "3000", "--tier-itpm", strconv.Itoa(fleetTierITPM)}, Limits: []string{"off", "none", "on"}},
		{Name: "outage", Args: []string{"--sessions", "32", "--calls", "20", "--think", "200ms",
			"--outage", "1s:" + fleetOutage.String()}, Limits: []string{"off", "on"}},
	}
}

// fleetCommon are the flags every run shares.
var fleetCommon = []string{"--create-stream", "--json", "--progress", "0",
	"--processes", strconv.Itoa(fleetProcesses), "--agents", "2", "--providers", "anthropic",
	"--rate-limit", "0", "--overload", "0", "--server-error", "0", "--billed-timeout", "0", "--bad-request", "0",
	"--breaker-threshold", strconv.Itoa(fleetThreshold), "--cooldown", fleetCooldown.String(), "--seed", "11"}

// fleetSummary is the part of publisher simulate's JSON summary the
// headline reads.
type fleetSummary struct {
	Processes      int        `json:"processes"`
	FleetLimits    string     `json:"fleet_limits"`
	WallSeconds    float64    `json:"wall_seconds"`
	RateLimited    int64      `json:"rate_limited"`
	OutageAttempts int64      `json:"outage_attempts"`
	Fleet          sim.Counts `json:"fleet"`
	Truth          struct {
		fakeprovider.Tally
		Overhead events.Usage `json:"overhead"`
	} `json:"truth"`
}

// fleetRun is one run: a scenario with the fleet's limits on or off.
type fleetRun struct {
	Scenario string       `json:"scenario"`
	Limits   string       `json:"fleet_limits"`
	Command  string       `json:"command"`
	Summary  fleetSummary `json:"summary"`
}

// fleetResult is the headline and the cases (fleetcases.go).
type fleetResult struct {
	Settings string         `json:"settings"`
	Runs     []fleetRun     `json:"runs"`
	Cases    []fleetCaseRun `json:"cases,omitempty"`
}

// goodput is the input tokens of the successful attempts per second of
// wall time: the work done, whatever calls failed.
func (s *fleetSummary) goodput() float64 {
	if s.WallSeconds <= 0 {
		return 0
	}
	return float64(s.Fleet.Usage.InputTokens) / s.WallSeconds
}

// rejected is the attempts the guards rejected (never sent).
func (s *fleetSummary) rejected() int64 {
	return s.Fleet.Outcomes["circuit_open"] + s.Fleet.Outcomes["rate_limit"] - s.RateLimited
}

// run returns the run of scenario with limits.
func (r *fleetResult) run(scenario, limits string) *fleetRun {
	for i := range r.Runs {
		if r.Runs[i].Scenario == scenario && r.Runs[i].Limits == limits {
			return &r.Runs[i]
		}
	}
	return nil
}

// runFleet runs every scenario with the fleet's limits off, then on, each
// on a fresh embedded server, with the built publisher.
func runFleet(ctx context.Context, cfg config, publisher string) (*fleetResult, error) {
	res := &fleetResult{Settings: fleetSettingsDoc}
	for _, sc := range fleetScenarios(cfg.Scale) {
		for _, limits := range sc.Limits {
			fmt.Fprintf(os.Stderr, "fleet: %s, fleet limits %s\n", sc.Name, limits)
			r, err := runFleetOnce(ctx, publisher, sc, limits)
			if err != nil {
				return nil, fmt.Errorf("fleet %s %s: %w", sc.Name, limits, err)
			}
			res.Runs = append(res.Runs, r)
		}
	}
	return res, nil
}

func runFleetOnce(ctx context.Context, publisher string, sc fleetScenario, limits string) (fleetRun, error) {
	dir, err := os.MkdirTemp("", "ledger-bench-fleet-")
	if err != nil {
		return fleetRun{}, err
	}
	defer os.RemoveAll(dir)
	srv, err := embedded.Start(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true})
	if err != nil {
		return fleetRun{}, err
	}
	defer srv.Shutdown()
	args := append(append([]string{"simulate", "--nats-url", srv.URL(), "--fleet-limits", limits, "--run-id", "bench-" + sc.Name + "-" + limits},
		fleetCommon...), sc.Args...)
	cmd := exec.CommandContext(ctx, publisher, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	r := fleetRun{Scenario: sc.Name, Limits: limits, Command: "publisher " + strings.Join(args[:1], " ") + " " + strings.Join(args[3:], " ")}
	if err := cmd.Run(); err != nil {
		return r, fmt.Errorf("%w: %s", err, lastLines(errOut.String(), 10))
	}
	if err := json.Unmarshal(out.Bytes(), &r.Summary); err != nil {
		return r, fmt.Errorf("reading its summary: %w", err)
	}
	return r, nil
}

// lastLines keeps the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// evaluateFleet checks the headline's targets, then the cases'. The time target compares
// the work done per second (input tokens of successful calls): with the
// fleet's limits off, most calls fail fast (their retry budgets spent in
// the storm of 429s), so their wall times are not those of the same work.
func evaluateFleet(r *fleetResult) []check {
	var cs []check
	off, on := r.run("tier", "off"), r.run("tier", "on")
	if off != nil && on != nil {
		drop := 1.0
		if off.Summary.RateLimited > 0 {
			drop = 1 - float64(on.Summary.RateLimited)/float64(off.Summary.RateLimited)
		}
		cs = append(cs, newCheck(fmt.Sprintf("fleet tier: 429s fall by >= %.0f %% with fleet limits on", 100*target429Drop),
			fmt.Sprintf("%d -> %d (%.1f %%)", off.Summary.RateLimited, on.Summary.RateLimited, 100*drop), drop >= target429Drop))
	}
	if none := r.run("tier", "none"); none != nil && on != nil {
		same := none.Summary.Fleet.CallsFailed == 0 && on.Summary.Fleet.CallsFailed == 0
		ratio := on.Summary.WallSeconds / none.Summary.WallSeconds
		cs = append(cs, newCheck(fmt.Sprintf("fleet tier: wall time for the same calls, all done (on / none: no guards, retrying each 429) <= %.1f", targetWallRatio),
			fmt.Sprintf("%.2fs / %.2fs = %.2f (429s %d / %d; calls failed %d / %d)", on.Summary.WallSeconds, none.Summary.WallSeconds, ratio,
				on.Summary.RateLimited, none.Summary.RateLimited, on.Summary.Fleet.CallsFailed, none.Summary.Fleet.CallsFailed),
			same && ratio <= targetWallRatio))
	}
	off, on = r.run("outage", "off"), r.run("outage", "on")
	if off != nil && on != nil {
		probes := int64(math.Ceil(fleetOutage.Seconds() / fleetCooldown.Seconds()))
		want := int64(fleetThreshold) + probes
		cs = append(cs, newCheck(fmt.Sprintf("fleet outage: attempts reaching the provider with fleet limits on <= threshold + one probe per cooldown (%d + %d)", fleetThreshold, probes),
			fmt.Sprintf("%d (off: %d; %d processes x (threshold + probes) = %d)", on.Summary.OutageAttempts, off.Summary.OutageAttempts, fleetProcesses, fleetProcesses*want),
			on.Summary.OutageAttempts <= want))
	}
	return append(cs, evaluateFleetCases(r.Cases)...)
}

// printFleet prints the headline's table.
func printFleet(out io.Writer, r *fleetResult) {
	fmt.Fprintf(out, "fleet headline: %s\n", r.Settings)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tfleet limits\tcalls ok\tfailed\tattempts sent\t429s\toutage attempts\trejected\twaits\twall s\tin tokens/s ok\tbilled for failed attempts in\tout\t")
	for _, run := range r.Runs {
		s := run.Summary
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.2f\t%.0f\t%d\t%d\t\n", run.Scenario, run.Limits,
			s.Fleet.CallsSucceeded, s.Fleet.CallsFailed, s.Truth.Attempts, s.RateLimited, s.OutageAttempts, s.rejected(),
			s.Fleet.Waits, s.WallSeconds, s.goodput(), s.Truth.Overhead.InputTokens, s.Truth.Overhead.OutputTokens)
	}
	tw.Flush()
	for _, run := range r.Runs {
		fmt.Fprintf(out, "  %s %s: %s\n", run.Scenario, run.Limits, run.Command)
	}
	fmt.Fprintln(out)
	if len(r.Cases) > 0 {
		printFleetCases(out, r.Cases)
	}
}

// fleetHeadline builds the publisher and runs the headline.
func fleetHeadline(ctx context.Context, cfg config) (*fleetResult, error) {
	dir, err := os.MkdirTemp("", "ledger-bench-bin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	publisher, err := buildGo(ctx, dir, "publisher")
	if err != nil {
		return nil, err
	}
	headline, cases, err := fleetParts()
	if err != nil {
		return nil, err
	}
	runs, err := fleetRunsWanted()
	if err != nil {
		return nil, err
	}
	res := &fleetResult{Settings: fleetSettingsDoc}
	if headline {
		if res, err = runFleet(ctx, cfg, publisher); err != nil {
			return nil, err
		}
	}
	if cases {
		if res.Cases, err = runFleetCases(ctx, publisher, runs); err != nil {
			return nil, err
		}
	}
	return res, nil
}
