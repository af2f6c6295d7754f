package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/agentledger/ledger/internal/projection"
	"github.com/agentledger/ledger/internal/topology"
)

// rebuildCmd rebuilds the live ledger from the whole stream under this
// binary's code while the live aggregator and the publishers keep running.
func rebuildCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("rebuild", stderr)
	var cf connFlags
	cf.register(fs)
	leaseTTL := fs.Duration("lease-ttl", 10*time.Second, "the live aggregators' --lease-ttl")
	batch := fs.Int("batch", 10000, "most events applied per batch")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return exitError{code: exitUsage}
	}
	conn, err := cf.open("ledger-rebuild")
	if err != nil {
		return err
	}
	defer conn.Close()
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	start := time.Now()
	var mu sync.Mutex
	var lastPhase string
	var lastAt time.Time
	var done uint64
	var projected time.Duration
	err = projection.Rebuild(ctx, projection.RebuildConfig{
		JS: conn.JS, Topology: topology.Config{}, LeaseTTL: *leaseTTL, BatchSize: *batch, Logger: log,
		Progress: func(phase string, applied, last uint64) {
			mu.Lock()
			defer mu.Unlock()
			if phase == lastPhase && time.Since(lastAt) < 2*time.Second && (last == 0 || applied < last) {
				return
			}
			lastPhase, lastAt = phase, time.Now()
			if phase == "project" {
				done = applied
				if last > 0 && applied >= last && projected == 0 {
					projected = time.Since(start)
				}
			}
			rate := float64(applied) / max(time.Since(start).Seconds(), 1e-3)
			if last > 0 {
				log.Info("rebuild", "phase", phase, "events", applied, "of", last, "events_per_s", int(rate))
			} else {
				log.Info("rebuild", "phase", phase, "records", applied)
			}
		},
	})
	if err != nil {
		return err
	}
	el := time.Since(start)
	fmt.Fprintf(stdout, "rebuilt the ledger in %s: projected %d events in %s (%.0f events/s), then switched over; the live aggregator resumes from there\n",
		el.Round(time.Millisecond), done, projected.Round(time.Millisecond), float64(done)/max(projected.Seconds(), 1e-3))
	return nil
}
