package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/projection"
)

// The hidden subcommands run in child processes.
const (
	// childAggregate is the aggregator's catch-up into empty buckets: the
	// live ones, or with --set a set of its own; --without turns features
	// off (features.go).
	childAggregate = "aggregate"
	childRaw       = "raw"
	childRebuild   = "rebuild" // after verify
)

// childResult is what a child prints on stdout, as JSON.
type childResult struct {
	Events        uint64  `json:"events"`
	Seconds       float64 `json:"seconds"`
	Rate          float64 `json:"rate"`
	HeapInusePeak uint64  `json:"heap_inuse_peak"`
	HeapAllocPeak uint64  `json:"heap_alloc_peak"`
	// VmHWMBytes is the child's own peak RSS, from /proc/self/status.
	VmHWMBytes uint64 `json:"vm_hwm_bytes"`
	// TotalSeconds is, for a rebuild, the whole command: projecting
	// (Seconds, the figure Rate is of), then switching the live ledger over.
	TotalSeconds float64 `json:"total_seconds,omitempty"`
}

func runChild(kind string, args []string) error {
	fs := flag.NewFlagSet(kind, flag.ContinueOnError)
	url := fs.String("nats-url", "", "server URL")
	last := fs.Uint64("last", 0, "last stream sequence to wait for")
	batch := fs.Int("batch", 0, "aggregator BatchSize")
	profile := fs.String("profile", "", "path prefix of the CPU and heap profiles")
	leaseTTL := fs.Duration("lease-ttl", 0, "lease TTL (0: the production default)")
	set := fs.String("set", "", "aggregate into this set of buckets (projection.ScratchNames) instead of the live ones")
	without := fs.String("without", "", "comma-separated features to turn off")
	if err := fs.Parse(args); err != nil {
		return err
	}
	pcfg := projection.Config{BatchSize: *batch, LeaseTTL: *leaseTTL}
	if *set != "" {
		pcfg.Names = projection.ScratchNames(*set)
	}
	if err := withoutFeatures(&pcfg, *without); err != nil {
		return err
	}
	if *url == "" || *last == 0 {
		return errors.New("--nats-url and --last are required")
	}
	nc, err := nats.Connect(*url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()

	var peak memPeak
	if *profile != "" {
		stop, err := startCPUProfile(*profile + "-cpu.pprof")
		if err != nil {
			return err
		}
		defer stop()
		peak.heapProfile = *profile + "-heap.pprof"
	}
	stopSampler := peak.sample(20 * time.Millisecond)
	var res childResult
	switch kind {
	case childRaw:
		res, err = rawConsume(ctx, js, *last)
	case childRebuild:
		res, err = rebuild(ctx, js, *last, *batch, *leaseTTL)
	default:
		pcfg.JS = js
		res, err = aggregate(ctx, js, *last, pcfg)
	}
	stopSampler()
	if err != nil {
		return err
	}
	res.HeapInusePeak, res.HeapAllocPeak = peak.inuse.Load(), peak.alloc.Load()
	res.VmHWMBytes = procKiB("/proc/self/status", "VmHWM")
	return printJSON(res)
}

// rawConsume reads the stream with an ordered consumer (the aggregator's
// kind: no acks), decoding every event and writing nothing.
func rawConsume(ctx context.Context, js jetstream.JetStream, last uint64) (childResult, error) {
	start := time.Now()
	s, err := js.Stream(ctx, names.AttemptsStream)
	if err != nil {
		return childResult{}, err
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{names.AttemptsSubjects}})
	if err != nil {
		return childResult{}, err
	}
	var n atomic.Uint64
	var bad atomic.Uint64
	done := make(chan struct{})
	cc, err := cons.Consume(func(m jetstream.Msg) {
		if _, err := events.Decode(m.Data()); err != nil {
			bad.Add(1)
		}
		md, err := m.Metadata()
		c := n.Add(1)
		if err == nil && md.Sequence.Stream >= last || c >= last {
			select {
			case <-done:
			default:
				close(done)
			}
		}
	}, jetstream.PullMaxMessages(20_000))
	if err != nil {
		return childResult{}, err
	}
	select {
	case <-done:
	case <-ctx.Done():
		cc.Stop()
		return childResult{}, ctx.Err()
	}
	elapsed := time.Since(start)
	cc.Stop()
	if b := bad.Load(); b > 0 {
		return childResult{}, fmt.Errorf("raw: %d events did not decode", b)
	}
	got := n.Load()
	return childResult{Events: got, Seconds: elapsed.Seconds(), Rate: float64(got) / elapsed.Seconds()}, nil
}

// readCheckpointOf reads the checkpoint sequence in a state bucket, as
// projection.ReadCheckpoint does for the live one.
func readCheckpointOf(ctx context.Context, js jetstream.JetStream, state string) (uint64, error) {
	if state == "" || state == names.StateBucket {
		return projection.ReadCheckpoint(ctx, js)
	}
	kv, err := js.KeyValue(ctx, state)
	if err != nil {
		return 0, err
	}
	e, err := kv.Get(ctx, names.CheckpointKey)
	if err != nil {
		return 0, err
	}
	var cp struct {
		Seq uint64 `json:"seq"`
	}
	err = json.Unmarshal(e.Value(), &cp)
	return cp.Seq, err
}

// aggregate runs the aggregator configured by cfg (as it ships, but for
// the features turned off) into empty buckets until its checkpoint
// reaches last.
func aggregate(ctx context.Context, js jetstream.JetStream, last uint64, cfg projection.Config) (childResult, error) {
	projection.LimitMemory() // as the aggregator command does
	start := time.Now()
	agg, err := projection.New(cfg)
	if err != nil {
		return childResult{}, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- agg.Run(runCtx) }()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		seq, err := readCheckpointOf(ctx, js, cfg.Names.State)
		if err == nil && seq >= last {
			break
		}
		select {
		case err := <-done:
			return childResult{}, fmt.Errorf("aggregator stopped before catching up: %v", err)
		case <-ctx.Done():
			return childResult{}, ctx.Err()
		case <-t.C:
		}
	}
	elapsed := time.Since(start)
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		return childResult{}, fmt.Errorf("aggregator: %w", err)
	}
	return childResult{Events: last, Seconds: elapsed.Seconds(), Rate: float64(last) / elapsed.Seconds()}, nil
}

// rebuild runs aggregator rebuild over the ledger the aggregate child left
// (no live aggregator runs, so the switch starts at once). Rate is of the
// projection into the scratch buckets, the part that grows with the
// stream; TotalSeconds includes the switch, which grows with the keys.
func rebuild(ctx context.Context, js jetstream.JetStream, last uint64, batch int, leaseTTL time.Duration) (childResult, error) {
	projection.LimitMemory() // as the aggregator command does
	start := time.Now()
	var projected time.Duration
	err := projection.Rebuild(ctx, projection.RebuildConfig{JS: js, BatchSize: batch, LeaseTTL: leaseTTL,
		Progress: func(phase string, applied, total uint64) {
			if phase == "project" && total > 0 && applied >= total && projected == 0 {
				projected = time.Since(start)
			}
		}})
	if err != nil {
		return childResult{}, err
	}
	total := time.Since(start)
	if projected == 0 {
		projected = total
	}
	return childResult{Events: last, Seconds: projected.Seconds(), Rate: float64(last) / projected.Seconds(), TotalSeconds: total.Seconds()}, nil
}

// startCPUProfile writes a CPU profile to path until stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}

// memPeak keeps the highest heap figures sampled.
type memPeak struct {
	inuse, alloc atomic.Uint64
	// heapProfile, when set, is rewritten with a heap profile whenever the
	// in-use heap grows by a tenth over the last profiled peak.
	heapProfile string
	profiled    uint64
}

// sample reads the heap every period until the returned func is called;
// that func waits for the sampler to stop and takes a last sample.
func (p *memPeak) sample(period time.Duration) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	read := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if ms.HeapInuse > p.inuse.Load() {
			p.inuse.Store(ms.HeapInuse)
		}
		if p.heapProfile != "" && ms.HeapInuse > p.profiled+p.profiled/10 {
			p.profiled = ms.HeapInuse
			if f, err := os.Create(p.heapProfile); err == nil {
				_ = pprof.WriteHeapProfile(f)
				_ = f.Close()
			}
		}
		if ms.HeapAlloc > p.alloc.Load() {
			p.alloc.Store(ms.HeapAlloc)
		}
	}
	go func() {
		defer close(done)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-quit:
				read()
				return
			case <-t.C:
				read()
			}
		}
	}()
	return func() { close(quit); <-done }
}
