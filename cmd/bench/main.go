// Command bench is the benchmark harness of the ledger: on an embedded
// NATS server with file storage in a temp dir it generates the workloads
// of the performance issue, then measures the publish rate (emit), the raw
// consume rate, the aggregator's catch-up rate into empty buckets, its
// peak RSS and heap, and the retry middleware's overhead, prints a table
// and writes the results as JSON under bench/results/.
//
//	go run ./cmd/bench [--scale 0.1] [--events N] [--workloads a,b,c] [--labels team]
//
// The raw consumer, the aggregator and rebuild each run in a child
// process (this binary re-executed with a hidden subcommand) so that their
// rates and peak RSS compare like with like; verify runs as the built
// `aggregator verify` command, with its own memory limit and defaults.
// The gateway's parts (its overhead, the upload flood against its byte
// budget) run the built cmd/gateway, or --gateway-bin, as a child process.
//
// The catch-up runs --rounds times with every feature on and without each
// feature whose cost has a target (features.go: pricing, rollups),
// interleaved, each into empty buckets of its own:
// the verdicts use the median paired cost and say inconclusive when the
// rounds disagree by more than the target. The aggregator and rebuild
// children hold their leases with the production TTL (--lease-ttl). The
// workloads' events carry no labels unless --labels says: the rollups
// then have few cells a batch, and their cost grows with the label sets a
// batch touches.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentledger/ledger/internal/bench"
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case childAggregate, childRaw, childRebuild:
			if err := runChild(os.Args[1], os.Args[2:]); err != nil {
				fmt.Fprintln(os.Stderr, "bench:", err)
				os.Exit(1)
			}
			return
		}
	}
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if err := run(context.Background(), cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// config is the harness's settings.
type config struct {
	Scale     float64  `json:"scale"`
	Events    int      `json:"events,omitempty"` // overrides the scaled event count of every workload
	Workloads []string `json:"workloads"`
	Seed      uint64   `json:"seed"`
	Batch     int      `json:"aggregator_batch_size,omitempty"`
	Out       string   `json:"-"`
	// Aggregator is the built aggregator command that verify runs as;
	// empty: the harness builds cmd/aggregator.
	Aggregator string `json:"-"`
	// Profile, when set, is a directory for CPU profiles of the server
	// (this process) and of each child, and heap profiles of the children.
	Profile string `json:"-"`
	// Fleet and Gateway say whether the fleet headline (fleet.go) and the
	// gateway's overhead (gateway.go) run: partOn (with the rest), partOff,
	// or partOnly (only the parts that say so).
	Fleet   string `json:"fleet"`
	Gateway string `json:"gateway"`
	// Upload says whether the upload flood (upload.go) runs, as Fleet.
	Upload string `json:"upload"`
	// GatewayBin is the gateway command the gateway's parts run; empty:
	// the harness builds cmd/gateway (set it to measure another build).
	GatewayBin string `json:"gateway_bin,omitempty"`
	// Durable also publishes each workload and measures the catch-up on a
	// server with sync_interval always, the durable default, to compare
	// with the old default in the same run.
	Durable bool `json:"durable"`
	// Rounds is how many times the catch-up runs with every feature and
	// without each one (features.go), interleaved.
	Rounds int `json:"rounds"`
	// Labels is the label set of every workload's events: one of
	// bench.Labels ("none", "team", "team,user").
	Labels string `json:"labels"`
	// LeaseTTL is the TTL of the leases of the aggregator and rebuild
	// children; 0 is the production default (projection's, 10 s, as
	// `aggregator run --lease-ttl`). A short TTL measures nothing more and
	// is lost under load: renewals queue behind the batches' writes.
	LeaseTTL time.Duration `json:"lease_ttl,omitempty"`
}

// defaultRounds is --rounds's default.
const defaultRounds = 3

// The values of --fleet and --gateway (BENCH_FLEET, BENCH_GATEWAY).
const (
	partOn   = "on"
	partOff  = "off"
	partOnly = "only"
)

// only reports whether some part runs alone: then only the parts that say
// partOnly run.
func (c *config) only() bool {
	return c.Fleet == partOnly || c.Gateway == partOnly || c.Upload == partOnly
}

// runs reports whether a part set to v runs.
func (c *config) runs(v string) bool { return v == partOnly || v == partOn && !c.only() }

func parseFlags(args []string) (config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	cfg := config{Scale: 1, Seed: 1, Fleet: partOn, Gateway: partOn, Upload: partOn, Durable: true, Rounds: defaultRounds, Labels: "none"}
	if v := os.Getenv("BENCH_SCALE"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 {
			return cfg, fmt.Errorf("BENCH_SCALE %q must be a positive number", v)
		}
		cfg.Scale = f
	}
	if v := os.Getenv("BENCH_EVENTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return cfg, fmt.Errorf("BENCH_EVENTS %q must be a positive integer", v)
		}
		cfg.Events = n
	}
	workloads := "a,b,c"
	if v := os.Getenv("BENCH_FLEET"); v != "" {
		cfg.Fleet = v
	}
	if v := os.Getenv("BENCH_GATEWAY"); v != "" {
		cfg.Gateway = v
	}
	if v := os.Getenv("BENCH_UPLOAD"); v != "" {
		cfg.Upload = v
	}
	cfg.GatewayBin = os.Getenv("BENCH_GATEWAY_BIN")
	if v := os.Getenv("BENCH_WORKLOADS"); v != "" {
		workloads = v
	}
	if v := os.Getenv("BENCH_DURABLE"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return cfg, fmt.Errorf("BENCH_DURABLE %q must be true or false", v)
		}
		cfg.Durable = b
	}
	if v := os.Getenv("BENCH_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return cfg, fmt.Errorf("BENCH_ROUNDS %q must be a positive integer", v)
		}
		cfg.Rounds = n
	}
	if v := os.Getenv("BENCH_LABELS"); v != "" {
		cfg.Labels = v
	}
	if v := os.Getenv("BENCH_LEASE_TTL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return cfg, fmt.Errorf("BENCH_LEASE_TTL %q must be a duration such as 10s", v)
		}
		cfg.LeaseTTL = d
	}
	fs.Float64Var(&cfg.Scale, "scale", cfg.Scale, "multiplies every workload's sizes (env BENCH_SCALE)")
	fs.IntVar(&cfg.Events, "events", cfg.Events, "events per workload, overriding the scaled count; sessions and requests scale with it (env BENCH_EVENTS)")
	fs.StringVar(&workloads, "workloads", workloads, "comma-separated workloads to run: a, b, c (env BENCH_WORKLOADS)")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the workload generator")
	fs.IntVar(&cfg.Batch, "batch", 0, "aggregator BatchSize (0: the aggregator's default)")
	fs.StringVar(&cfg.Out, "out", "bench/results", "directory of the JSON results")
	fs.StringVar(&cfg.Aggregator, "aggregator", "", "the built aggregator command, run for verify as it ships (default: build cmd/aggregator)")
	fs.StringVar(&cfg.Profile, "profile", "", "directory for pprof profiles: the server's CPU during each child, each child's CPU and peak heap")
	fs.BoolVar(&cfg.Durable, "durable", cfg.Durable, "also publish each workload and measure the aggregator's catch-up on a server with sync_interval always (the durable default), against the old default (an fsync every 2 minutes) in the same run (env BENCH_DURABLE)")
	fs.StringVar(&cfg.Fleet, "fleet", cfg.Fleet, "the fleet headline, 8 publisher processes against a tier limit and through an outage, fleet limits off and on, and the fleet cases (BENCH_FLEET_RUNS, BENCH_FLEET_PARTS, BENCH_FLEET_CASES): on (with the rest), off, or only (env BENCH_FLEET)")
	fs.StringVar(&cfg.Gateway, "gateway", cfg.Gateway, "the gateway's overhead against the fake provider called directly: on (with the rest), off, or only (env BENCH_GATEWAY)")
	fs.StringVar(&cfg.Upload, "upload", cfg.Upload, "the upload flood against the gateway's byte budget, peak RSS: on (with the rest), off, or only (env BENCH_UPLOAD)")
	fs.StringVar(&cfg.GatewayBin, "gateway-bin", cfg.GatewayBin, "the gateway command the gateway's parts run (default: build cmd/gateway; env BENCH_GATEWAY_BIN)")
	fs.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "rounds of the with/without catch-up comparisons (pricing, rollups): each round runs the catch-up with every feature and without each one, the order reversed every other round; the verdicts use the medians (env BENCH_ROUNDS)")
	fs.DurationVar(&cfg.LeaseTTL, "lease-ttl", cfg.LeaseTTL, "lease TTL of the aggregator and rebuild children, at least 1s; 0: the production default, 10s (env BENCH_LEASE_TTL)")
	fs.StringVar(&cfg.Labels, "labels", cfg.Labels, "labels of every workload's events: none; team (ten teams, by session); team,user (also a user for every ten sessions): the rollups' cells, and so their cost, grow with the label sets a batch touches (env BENCH_LABELS)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if !slices.Contains(bench.Labels, cfg.Labels) {
		return cfg, fmt.Errorf("--labels (BENCH_LABELS) %q must be one of %s", cfg.Labels, strings.Join(bench.Labels, ", "))
	}
	if cfg.Rounds < 1 {
		return cfg, fmt.Errorf("--rounds %d must be at least 1", cfg.Rounds)
	}
	if cfg.LeaseTTL != 0 && cfg.LeaseTTL < time.Second {
		return cfg, fmt.Errorf("--lease-ttl %s must be 0 (the production default) or at least 1s: a shorter lease is lost under load and measures nothing more", cfg.LeaseTTL)
	}
	if cfg.Scale <= 0 {
		return cfg, fmt.Errorf("--scale %v must be positive", cfg.Scale)
	}
	for _, part := range []struct{ name, v string }{{"--fleet (BENCH_FLEET)", cfg.Fleet}, {"--gateway (BENCH_GATEWAY)", cfg.Gateway}, {"--upload (BENCH_UPLOAD)", cfg.Upload}} {
		if part.v != partOn && part.v != partOff && part.v != partOnly {
			return cfg, fmt.Errorf("%s %q must be on, off or only", part.name, part.v)
		}
	}
	if cfg.Events < 0 {
		return cfg, fmt.Errorf("--events %d must not be negative", cfg.Events)
	}
	for _, w := range strings.Split(workloads, ",") {
		w = strings.TrimSpace(w)
		switch w {
		case "a", "b", "c":
			cfg.Workloads = append(cfg.Workloads, w)
		case "":
		default:
			return cfg, fmt.Errorf("--workloads: unknown workload %q; the workloads are a, b, c", w)
		}
	}
	if len(cfg.Workloads) == 0 {
		return cfg, errors.New("--workloads: no workload selected")
	}
	return cfg, nil
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	return enc.Encode(v)
}
