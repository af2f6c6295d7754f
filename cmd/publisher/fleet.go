package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/cli"
	connectpkg "github.com/agentledger/ledger/internal/connect"
	"github.com/agentledger/ledger/internal/fleet"
	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/guardflag"
	"github.com/agentledger/ledger/internal/sim"
	"github.com/agentledger/ledger/internal/sim/fakeprovider"
)

// MaxProcesses bounds --processes.
const maxProcesses = 64

// The modes of --fleet-limits.
const (
	limitsNone = "none" // no guards: breakers never open, nothing limited (deterministic)
	limitsOff  = "off"  // each process its own breaker, limits and budget
	limitsOn   = "on"   // the fleet's shared state
)

// fleetFlags are simulate's flags of the processes, the fake provider's
// limits and outage, and the guards.
type fleetFlags struct {
	processes int
	tier      fakeprovider.Tier
	outage    string
	limits    string
	threshold int
	cooldown  time.Duration
	wait      time.Duration
	guardSets guardflag.Flags // --limit, --limits-file, --retry-budget-*
	// Set by the parent for its workers.
	worker      string // k/N
	providerURL string
}

func (ff *fleetFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&ff.processes, "processes", 1, "run the fleet as this many OS processes (this command re-executed), all calling one fake provider served by this process on 127.0.0.1; --agents is per process")
	fs.Int64Var(&ff.tier.RequestsPerMinute, "tier-rpm", 0, "the fake provider's organization limit of requests per minute (0: none)")
	fs.Int64Var(&ff.tier.InputTokensPerMinute, "tier-itpm", 0, "its limit of input tokens per minute (0: none)")
	fs.Int64Var(&ff.tier.OutputTokensPerMinute, "tier-otpm", 0, "its limit of output tokens per minute (0: none)")
	fs.StringVar(&ff.outage, "outage", "", "`START:DURATION` after the start during which the provider answers 503 to every call, e.g. 2s:5s")
	fs.StringVar(&ff.limits, "fleet-limits", limitsNone, "on: a breaker, rate limits and a retry budget per upstream shared by every process (NATS KV); off: the same per process; none: breakers that never open and no limits (a deterministic run)")
	fs.IntVar(&ff.threshold, "breaker-threshold", breaker.DefaultFailureThreshold, "with --fleet-limits on|off: consecutive retryable failures that open an upstream's breaker")
	fs.DurationVar(&ff.cooldown, "cooldown", time.Second, "with --fleet-limits on|off: how long an open breaker waits before a probe")
	fs.DurationVar(&ff.wait, "fleet-wait", fleet.DefaultWait, "with --fleet-limits on: the longest a call waits for the shared state before deciding alone")
	ff.guardSets.Register(fs)
	fs.StringVar(&ff.worker, "worker", "", "(internal) this process is worker `K/N` of a --processes run")
	fs.StringVar(&ff.providerURL, "provider-url", "", "(internal) the fake provider's root URL, served by the parent")
}

// validate checks the flags and applies them to cfg.
func (ff *fleetFlags) validate(cfg *sim.Config) error {
	switch {
	case ff.processes < 1 || ff.processes > maxProcesses:
		return cli.Usagef("--processes: %d must be from 1 to %d", ff.processes, maxProcesses)
	case ff.limits != limitsNone && ff.limits != limitsOff && ff.limits != limitsOn:
		return cli.Usagef("--fleet-limits: %q must be on, off or none", ff.limits)
	case ff.threshold < 1:
		return cli.Usagef("--breaker-threshold: %d must be at least 1", ff.threshold)
	case ff.cooldown <= 0:
		return cli.Usagef("--cooldown: %s must be positive", ff.cooldown)
	case ff.wait <= 0:
		return cli.Usagef("--fleet-wait: %s must be positive", ff.wait)
	case ff.tier.RequestsPerMinute < 0 || ff.tier.InputTokensPerMinute < 0 || ff.tier.OutputTokensPerMinute < 0:
		return cli.Usagef("--tier-rpm, --tier-itpm, --tier-otpm must not be negative")
	}
	o, err := parseOutage(ff.outage)
	if err != nil {
		return cli.Usagef("--outage: %v", err)
	}
	if err := ff.guardSets.Apply(&guard.Config{Budget: guard.Budget{On: true}}); err != nil {
		return cli.Usagef("%v", err)
	}
	cfg.Tier, cfg.Outage = ff.tier, o
	if ff.worker != "" {
		if cfg.Shard, err = parseWorker(ff.worker); err != nil {
			return cli.Usagef("--worker: %v", err)
		}
		if !strings.HasPrefix(ff.providerURL, "http://127.0.0.1:") {
			return cli.Usagef("--provider-url: %q must be a loopback URL http://127.0.0.1:PORT", ff.providerURL)
		}
		cfg.ProviderURL = ff.providerURL
	}
	return nil
}

// parent reports whether this process runs the workers of a
// multi-process fleet.
func (ff *fleetFlags) parent() bool { return ff.processes > 1 && ff.worker == "" }

// parseOutage reads START:DURATION; "" is no outage.
func parseOutage(s string) (fakeprovider.Outage, error) {
	if s == "" {
		return fakeprovider.Outage{}, nil
	}
	a, b, ok := strings.Cut(s, ":")
	if !ok {
		return fakeprovider.Outage{}, fmt.Errorf("%q must be START:DURATION, e.g. 2s:5s", s)
	}
	start, err1 := time.ParseDuration(a)
	d, err2 := time.ParseDuration(b)
	if err := errors.Join(err1, err2); err != nil {
		return fakeprovider.Outage{}, fmt.Errorf("%q: %w", s, err)
	}
	if start < 0 || d <= 0 {
		return fakeprovider.Outage{}, fmt.Errorf("%q: the start must not be negative and the duration must be positive", s)
	}
	return fakeprovider.Outage{Start: start, Duration: d}, nil
}

// parseWorker reads K/N.
func parseWorker(s string) (sim.Shard, error) {
	a, b, ok := strings.Cut(s, "/")
	k, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || n > maxProcesses || k < 0 || k >= n {
		return sim.Shard{}, fmt.Errorf("%q must be K/N with 0 <= K < N <= %d", s, maxProcesses)
	}
	return sim.Shard{Index: k, Count: n}, nil
}

// guards builds the guards --fleet-limits asks for, with the limits and
// the retry budget the flags set and the policy's attempt timeout: nil
// for none; for on, a Fleet on conn (closed by the returned function)
// whose shared state must be ready within 10 s.
func (ff *fleetFlags) guards(ctx context.Context, conn *connectpkg.Conn, runID string, attemptTimeout time.Duration, logger *slog.Logger) (*guard.Set, func(), error) {
	if ff.limits == limitsNone {
		return nil, func() {}, nil
	}
	name := runID
	if ff.worker != "" {
		name += "-w" + strings.ReplaceAll(ff.worker, "/", "of")
	}
	cfg := guard.Standard(breaker.Config{FailureThreshold: ff.threshold, Cooldown: ff.cooldown})
	cfg.AttemptTimeout = attemptTimeout
	if err := ff.guardSets.Apply(&cfg); err != nil {
		return nil, nil, err
	}
	return fleet.Guards(ctx, conn.NC, conn.JS, ff.limits == limitsOn, fleet.Options{Process: name, Wait: ff.wait, Logger: logger}, cfg)
}
