package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// buildGo builds ./cmd/name of the module this harness runs in into dir.
func buildGo(ctx context.Context, dir, name string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("locating the module: %w", err)
	}
	bin := filepath.Join(dir, name)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/"+name)
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(out)))
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building cmd/%s: %w: %s", name, err, msg)
	}
	return bin, nil
}

// runVerifyCommand runs `aggregator verify` as it ships (its own memory
// limit, its default flags but --json) on the ledger the aggregator child
// left, and measures its rate and its peak RSS. Anything but "identical"
// at the stream's last sequence is an error.
func runVerifyCommand(ctx context.Context, cfg config, url string, last uint64) (childRun, error) {
	cmd := exec.CommandContext(ctx, cfg.Aggregator, "verify", "--nats-url", url, "--json")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return childRun{}, fmt.Errorf("verify: %w", err)
	}
	stop := pollHWM(cmd.Process.Pid)
	err := cmd.Wait()
	elapsed := time.Since(start)
	hwm := stop()
	if err != nil {
		return childRun{}, fmt.Errorf("verify: %w: %s%s", err, out.String(), errOut.String())
	}
	var d struct {
		Identical  bool   `json:"identical"`
		Checkpoint uint64 `json:"checkpoint"`
	}
	if err := json.Unmarshal(out.Bytes(), &d); err != nil {
		return childRun{}, fmt.Errorf("verify: reading its output %q: %w", out.String(), err)
	}
	if !d.Identical || d.Checkpoint != last {
		return childRun{}, fmt.Errorf("verify: checkpoint %d of %d: %s", d.Checkpoint, last, out.String())
	}
	r := childRun{childResult: childResult{Events: last, Seconds: elapsed.Seconds(), Rate: float64(last) / elapsed.Seconds(), VmHWMBytes: hwm}}
	r.PeakRSSBytes = hwm
	return r, nil
}

// pollHWM reads a process's peak RSS (VmHWM, which only grows) every 10ms
// until stop is called, which returns the last value read: the figure
// misses at most the growth of the process's last 10ms.
func pollHWM(pid int) (stop func() uint64) {
	path := "/proc/" + strconv.Itoa(pid) + "/status"
	var hwm atomic.Uint64
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			if v := procKiB(path, "VmHWM"); v > hwm.Load() {
				hwm.Store(v)
			}
			select {
			case <-quit:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 { close(quit); <-done; return hwm.Load() }
}

// aggregatorBinary returns cfg.Aggregator, building it into a temp dir
// when it is empty; cleanup removes what was built.
func aggregatorBinary(ctx context.Context, cfg config) (string, func(), error) {
	if cfg.Aggregator != "" {
		if _, err := os.Stat(cfg.Aggregator); err != nil {
			return "", nil, fmt.Errorf("--aggregator: %w", err)
		}
		return cfg.Aggregator, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "ledger-bench-bin-")
	if err != nil {
		return "", nil, err
	}
	bin, err := buildGo(ctx, dir, "aggregator")
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, errors.Join(err, errors.New("pass --aggregator to use a built one"))
	}
	return bin, func() { _ = os.RemoveAll(dir) }, nil
}
