package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/agentledger/ledger/internal/cli"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/progress"
	"github.com/agentledger/ledger/internal/projection"
	"github.com/agentledger/ledger/internal/topology"
)

// rebuildCmd rebuilds the live ledger from the whole stream under this
// binary's code while the live aggregator and the publishers keep running.
func rebuildCmd(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlagSet("rebuild", stderr)
	var cf connFlags
	cf.register(fs)
	leaseTTL := fs.Duration("lease-ttl", 10*time.Second, "how long this rebuild's silent claim and live lease last (others judge them by the TTL written with them, so it need not match the live aggregators' --lease-ttl)")
	batch := fs.Int("batch", projection.DefaultBatchSize, "most events applied per batch of the scratch projection")
	acceptLoss := fs.Bool("accept-loss", false, "rebuild from the events the stream still holds when some are gone (retention or a purge), and record the lost ranges in ledger_state key \"loss\"")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return cli.Said
	}
	limitMemory()
	conn, err := cf.open("ledger-rebuild")
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, unguard := guard(ctx, conn, &err)
	defer unguard()
	log, err := cf.logger()
	if err != nil {
		return err
	}
	// The events projected are the stream's, from its first sequence: after
	// a loss (--accept-loss) the first is past 1.
	first := uint64(1)
	if st, err := conn.JS.Stream(ctx, names.AttemptsStream); err == nil {
		first = max(st.CachedInfo().State.FirstSeq, 1)
	}
	start := time.Now()
	var mu sync.Mutex
	var meter *progress.Meter
	var phase string
	var done uint64
	var projected time.Duration
	err = projection.Rebuild(ctx, projection.RebuildConfig{
		JS: conn.JS, Topology: topology.Config{}, LeaseTTL: *leaseTTL, BatchSize: *batch, Logger: log, AcceptLoss: *acceptLoss,
		Progress: func(p string, applied, last uint64) {
			mu.Lock()
			defer mu.Unlock()
			if p != phase {
				if meter != nil {
					meter.Finish()
				}
				unit := "events"
				if last == 0 {
					unit = "records"
				}
				phase, meter = p, progress.New(stderr, "rebuild "+p, progress.Options{Unit: unit})
			}
			meter.Update(applied, last)
			if p == "project" {
				done = applied
				if last > 0 && applied >= last && projected == 0 {
					projected = time.Since(start)
				}
			}
		},
	})
	mu.Lock()
	if meter != nil {
		meter.Finish()
	}
	mu.Unlock()
	if err != nil {
		return err
	}
	el := time.Since(start)
	if done >= first {
		done -= first - 1
	}
	fmt.Fprintf(stdout, "rebuilt the ledger in %s: projected %d events in %s (%.0f events/s), then switched over; the live aggregator resumes from there\n",
		el.Round(time.Millisecond), done, projected.Round(time.Millisecond), float64(done)/max(projected.Seconds(), 1e-3))
	return nil
}
