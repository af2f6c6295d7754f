package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/agentledger/ledger/internal/sim"
	"github.com/agentledger/ledger/internal/sim/fakeprovider"
)

// reexecEnv marks a process started by a --processes parent, so that a
// test binary standing in for the command runs the command (TestMain).
const reexecEnv = "LEDGER_PUBLISHER_WORKER"

// workerStop is how long a worker has to finish after an interrupt
// before it is killed.
const workerStop = 30 * time.Second

// runSimulateParent runs a fleet of --processes workers: it serves the
// fake provider on 127.0.0.1, runs this command again once per worker
// with its share of the sessions, and adds up what they report; the
// truth is its provider's.
func runSimulateParent(ctx context.Context, f *simulateFlags, args []string, stdout, stderr io.Writer) error {
	cfg := f.cfg
	srv, err := fakeprovider.New(fakeprovider.Options{Seed: cfg.Seed, Mix: cfg.Mix, Tier: cfg.Tier, Outage: cfg.Outage})
	if err != nil {
		return err
	}
	defer srv.Close()
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("simulate: finding this command to run the workers: %w", err)
	}
	n := f.fleet.processes
	outs := make([]bytes.Buffer, n)
	errs := make([]error, n)
	logs := &lockedWriter{w: stderr}
	begin := time.Now()
	var wg sync.WaitGroup
	for k := range n {
		cmd := exec.CommandContext(ctx, self, workerArgs(args, k, n, srv.URL(), cfg.RunID)...)
		cmd.Env = append(os.Environ(), reexecEnv+"=1")
		cmd.Stdout = &outs[k]
		cmd.Stderr = &prefixWriter{w: logs, prefix: "worker " + strconv.Itoa(k) + ": "}
		cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
		cmd.WaitDelay = workerStop
		if err := cmd.Start(); err != nil {
			errs[k] = err
			continue
		}
		wg.Go(func() { errs[k] = cmd.Wait() })
	}
	wg.Wait()
	wall := time.Since(begin)
	srv.Close() // waits for the handlers: the truth is final
	sum := simulateSummary{
		RunID: cfg.RunID, Seed: cfg.Seed, Agents: cfg.Agents, Sessions: cfg.Sessions,
		Calls: int64(cfg.Sessions) * int64(cfg.CallsPerSession), Mix: cfg.Mix, ElapsedMS: wall.Milliseconds(),
		Interrupted: ctx.Err() != nil, Fleet: sim.Counts{Outcomes: map[string]int64{}},
	}
	sum.fleetFields(f, wall)
	for k := range n {
		var w simulateSummary
		if err := json.Unmarshal(outs[k].Bytes(), &w); err != nil {
			sum.Errors = append(sum.Errors, fmt.Sprintf("worker %d: %v; its summary: %v", k, errs[k], err))
			continue
		}
		if errs[k] != nil {
			sum.Errors = append(sum.Errors, fmt.Sprintf("worker %d: %v", k, errs[k]))
		}
		sum.Fleet.Add(w.Fleet)
		sum.Events.add(w.Events)
		sum.Interrupted = sum.Interrupted || w.Interrupted
		sum.Errors = append(sum.Errors, w.Errors...)
	}
	sum.Fleet.Retries = sum.Fleet.Attempts - sum.Fleet.Calls
	return finishSimulate(f, &sum, srv.Truth(), stdout)
}

// workerArgs are the arguments of worker k of n: the parent's, then what
// a worker does differently (later flags win).
func workerArgs(args []string, k, n int, providerURL, runID string) []string {
	out := append([]string{"simulate"}, args...)
	return append(out,
		"--worker", strconv.Itoa(k)+"/"+strconv.Itoa(n),
		"--provider-url", providerURL,
		"--run-id", runID,
		"--json", "--progress", "0", "--truth", "")
}

// add adds a worker's publisher figures.
func (e *eventsSummary) add(o eventsSummary) {
	e.Enqueued += o.Enqueued
	e.Acked += o.Acked
	e.Duplicates += o.Duplicates
	e.Retries += o.Retries
	e.Undelivered += o.Undelivered
	e.Recovered += o.Recovered
	e.Kept += o.Kept
}

// lockedWriter serializes the writes of several workers.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// prefixWriter prefixes each line a worker writes.
type prefixWriter struct {
	w      io.Writer
	prefix string
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		if _, err := p.w.Write(append([]byte(p.prefix), p.buf[:i+1]...)); err != nil {
			return len(b), err
		}
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}
