package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/agentledger/ledger/internal/embedded"
)

// The cases of the fleet issue 16, besides the headline: three providers
// (Gemini sends no rate-limit headers) with 4 agents a process and no
// think time, Gemini's limit unknown (inferred from its 429s) and then
// configured; and a run that ends while the provider is down followed by
// a healthy run on the same NATS server. Each case runs
// BENCH_FLEET_RUNS times (default 5); BENCH_FLEET_PARTS=cases skips the
// headline, and BENCH_FLEET_CASES=a,b runs only those cases (with the
// cases they compare with).
const (
	fleetCaseTierRPM   = "1200"
	fleetCaseGap       = 3 * time.Second // between the mid-outage run and the healthy one
	targetCase429Share = 0.02            // 429s with fleet limits on, of none's
	fleetCasesDoc      = "8 processes x 4 agents, no think time, anthropic, openai and gemini round robin, 32 sessions x 10 calls, no injected faults; tier 1200 requests a minute for each provider (gemini says it in no header); none retries every 429 after its hint (500 retries, 10 s hint cap), so that it does the same calls"
)

// fleetCaseArgs are the flags of the three-provider runs.
var fleetCaseArgs = []string{"--providers", "anthropic,openai,gemini", "--agents", "4", "--think", "0", "--sessions", "32", "--calls", "10"}

// fleetCase is one case: the runs it makes and how they compare.
type fleetCase struct {
	Name string
	// Modes are the --fleet-limits modes it runs, with Args.
	Modes []string
	Args  []string
	// Against names the case whose none run is its reference ("": its own).
	Against string
	// After, when set, is a run made first on the same server (the
	// mid-outage run); the case's figures are the run after it.
	After []string
}

func fleetCases() []fleetCase {
	tier := append(append([]string{}, fleetCaseArgs...), "--tier-rpm", fleetCaseTierRPM, "--max-retries", strconv.Itoa(fleetTierRetries), "--hint-cap", fleetTierHintCap.String())
	return []fleetCase{
		{Name: "gemini-unknown", Modes: []string{"none", "on"}, Args: tier},
		{Name: "gemini-configured", Modes: []string{"on"}, Args: append(append([]string{}, tier...), "--limit", "gemini/gemini-2.5-flash=rpm:"+fleetCaseTierRPM), Against: "gemini-unknown"},
		{Name: "healthy-after-outage", Modes: []string{"on"}, Args: fleetCaseArgs,
			After: append(append([]string{}, fleetCaseArgs...), "--outage", "0.1s:30s")},
	}
}

// fleetCaseRun is one run of a case.
type fleetCaseRun struct {
	Case    string       `json:"case"`
	Limits  string       `json:"fleet_limits"`
	Run     int          `json:"run"`
	Command string       `json:"command"`
	Summary fleetSummary `json:"summary"`
	// Before is the summary of the mid-outage run before it, if any.
	Before *fleetSummary `json:"before,omitempty"`
}

// fleetParts is BENCH_FLEET_PARTS: all (default), cases or headline.
func fleetParts() (headline, cases bool, err error) {
	switch v := os.Getenv("BENCH_FLEET_PARTS"); v {
	case "", "all":
		return true, true, nil
	case "cases":
		return false, true, nil
	case "headline":
		return true, false, nil
	default:
		return false, false, fmt.Errorf("BENCH_FLEET_PARTS: %q must be all, cases or headline", v)
	}
}

// fleetRunsWanted is BENCH_FLEET_RUNS, default 5.
func fleetRunsWanted() (int, error) {
	v := os.Getenv("BENCH_FLEET_RUNS")
	if v == "" {
		return 5, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 100 {
		return 0, fmt.Errorf("BENCH_FLEET_RUNS: %q must be from 1 to 100", v)
	}
	return n, nil
}

// runFleetCases runs every case runs times, each run on a fresh server.
func runFleetCases(ctx context.Context, publisher string, runs int) ([]fleetCaseRun, error) {
	var out []fleetCaseRun
	only := map[string]bool{}
	for name := range strings.SplitSeq(os.Getenv("BENCH_FLEET_CASES"), ",") {
		if name != "" {
			only[name] = true
		}
	}
	for _, c := range fleetCases() {
		if only[c.Name] && c.Against != "" {
			only[c.Against] = true
		}
	}
	for i := range runs {
		for _, c := range fleetCases() {
			if len(only) > 0 && !only[c.Name] {
				continue
			}
			for _, mode := range c.Modes {
				fmt.Fprintf(os.Stderr, "fleet case %s, fleet limits %s, run %d of %d\n", c.Name, mode, i+1, runs)
				r, err := runFleetCase(ctx, publisher, c, mode, i)
				if err != nil {
					return nil, fmt.Errorf("fleet case %s %s run %d: %w", c.Name, mode, i+1, err)
				}
				out = append(out, r)
			}
		}
	}
	return out, nil
}

func runFleetCase(ctx context.Context, publisher string, c fleetCase, mode string, i int) (fleetCaseRun, error) {
	r := fleetCaseRun{Case: c.Name, Limits: mode, Run: i + 1}
	dir, err := os.MkdirTemp("", "ledger-bench-fleet-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	srv, err := embedded.Start(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true})
	if err != nil {
		return r, err
	}
	defer srv.Shutdown()
	simulate := func(runID string, args []string) (fleetSummary, string, error) {
		full := append(append([]string{"simulate", "--nats-url", srv.URL(), "--fleet-limits", mode, "--run-id", runID}, fleetCommon...), args...)
		cmd := exec.CommandContext(ctx, publisher, full...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		var s fleetSummary
		line := "publisher simulate " + strings.Join(full[3:], " ")
		if err := cmd.Run(); err != nil {
			return s, line, fmt.Errorf("%w: %s", err, lastLines(stderr.String(), 10))
		}
		return s, line, json.Unmarshal([]byte(stdout.String()), &s)
	}
	id := "case" + strconv.Itoa(i+1) + "-" + strings.ReplaceAll(c.Name, "-", "") + "-" + mode
	if c.After != nil {
		before, _, err := simulate(id+"-outage", c.After)
		if err != nil {
			return r, fmt.Errorf("the mid-outage run: %w", err)
		}
		r.Before = &before
		time.Sleep(fleetCaseGap) // as a user starts the next run: the breaker's cooldown is long over
	}
	r.Summary, r.Command, err = simulate(id, c.Args)
	return r, err
}

// caseReference is the none run a case's run i compares with.
func caseReference(runs []fleetCaseRun, c fleetCase, i int) *fleetCaseRun {
	name := c.Name
	if c.Against != "" {
		name = c.Against
	}
	for k := range runs {
		if runs[k].Case == name && runs[k].Limits == "none" && runs[k].Run == i {
			return &runs[k]
		}
	}
	return nil
}

// stoppedByGuards are the attempts a run's guards refused (never sent):
// the breaker's, and waits for capacity past the cap.
func (s *fleetSummary) stoppedByGuards() int64 { return s.rejected() }

// evaluateFleetCases checks the targets on every run.
func evaluateFleetCases(runs []fleetCaseRun) []check {
	var cs []check
	byName := map[string]fleetCase{}
	for _, c := range fleetCases() {
		byName[c.Name] = c
	}
	for _, r := range runs {
		if r.Limits != "on" {
			continue
		}
		c := byName[r.Case]
		s := r.Summary
		label := fmt.Sprintf("fleet case %s run %d", r.Case, r.Run)
		cs = append(cs, newCheck(label+": no call failed (budget, breaker or any)",
			fmt.Sprintf("%d failed, %d circuit_open", s.Fleet.CallsFailed, s.Fleet.Outcomes["circuit_open"]), s.Fleet.CallsFailed == 0))
		if r.Before != nil {
			cs = append(cs, newCheck(label+": the healthy run after a mid-outage run has 0 circuit_open",
				fmt.Sprintf("%d (the mid-outage run: %d)", s.Fleet.Outcomes["circuit_open"], r.Before.Fleet.Outcomes["circuit_open"]),
				s.Fleet.Outcomes["circuit_open"] == 0))
		}
		none := caseReference(runs, c, r.Run)
		if none == nil {
			continue
		}
		n := none.Summary
		cs = append(cs, newCheck(fmt.Sprintf("%s: 429s <= %.0f %% of none's", label, 100*targetCase429Share),
			fmt.Sprintf("%d / %d", s.RateLimited, n.RateLimited), float64(s.RateLimited) <= targetCase429Share*float64(n.RateLimited)))
		ratio := s.WallSeconds / n.WallSeconds
		cs = append(cs, newCheck(fmt.Sprintf("%s: wall time <= %.1f x none's (the same calls, all done)", label, targetWallRatio),
			fmt.Sprintf("%.2fs / %.2fs = %.2f (none failed %d)", s.WallSeconds, n.WallSeconds, ratio, n.Fleet.CallsFailed),
			n.Fleet.CallsFailed == 0 && ratio <= targetWallRatio))
	}
	return cs
}

// printFleetCases prints the cases' table.
func printFleetCases(out io.Writer, runs []fleetCaseRun) {
	fmt.Fprintf(out, "fleet cases: %s\n", fleetCasesDoc)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tfleet limits\trun\tcalls ok\tfailed\t429s\tcircuit_open\tstopped by guards\twaits\twall s\t")
	for _, r := range runs {
		s := r.Summary
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.2f\t\n", r.Case, r.Limits, r.Run, s.Fleet.CallsSucceeded, s.Fleet.CallsFailed,
			s.RateLimited, s.Fleet.Outcomes["circuit_open"], s.stoppedByGuards(), s.Fleet.Waits, s.WallSeconds)
	}
	tw.Flush()
	seen := map[string]bool{}
	for _, r := range runs {
		if k := r.Case + " " + r.Limits; !seen[k] {
			seen[k] = true
			fmt.Fprintf(out, "  %s %s: %s\n", r.Case, r.Limits, r.Command)
		}
	}
	fmt.Fprintln(out)
}
