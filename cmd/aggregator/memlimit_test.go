package main

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/cli"
	"github.com/agentledger/ledger/internal/ledgertest"
	"github.com/agentledger/ledger/internal/projection"
)

// limitAtStart is the soft memory limit once the package is initialised,
// before any command ran (this init runs after those of the package's own
// files).
var limitAtStart int64

func init() { limitAtStart = debug.SetMemoryLimit(-1) }

// noLimit is debug.SetMemoryLimit's "no limit".
const noLimit = math.MaxInt64

// TestMemoryLimitPerCommand: no command's limit is set for all of them at
// start-up; run and rebuild set the aggregator's, report and wait leave the
// runtime's default.
func TestMemoryLimitPerCommand(t *testing.T) {
	if os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("GOMEMLIMIT is set, and overrides every command's limit")
	}
	require.Equal(t, int64(noLimit), limitAtStart, "a memory limit was set before any command ran")
	prev := debug.SetMemoryLimit(noLimit)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })

	// rebuild of an empty stream fails at present (the scratch projection
	// is stopped while it starts), so the stream has a few events.
	url, js := streamWith(t, rand.New(rand.NewPCG(1, 2)), ledgertest.Spec{Sessions: 2, Calls: 5})

	for _, tt := range []struct {
		args  []string
		limit int64
	}{
		{[]string{"report", "--nats-url", url}, noLimit},
		{[]string{"rebuild", "--nats-url", url, "--lease-ttl", "300ms"}, projection.MemoryLimit},
		{[]string{"wait", "--nats-url", url, "--timeout", "30s"}, noLimit},
	} {
		debug.SetMemoryLimit(noLimit)
		code, _, stderr := run(t, tt.args...)
		require.Equal(t, cli.ExitOK, code, "%v: %s", tt.args, stderr)
		require.Equal(t, tt.limit, debug.SetMemoryLimit(-1), "%v", tt.args)
	}

	// run: the limit is set while it runs.
	debug.SetMemoryLimit(noLimit)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- command(ctx, []string{"run", "--nats-url", url, "--lease-ttl", "300ms"}, os.Stdout, os.Stderr)
	}()
	more := ledgertest.Generate(rand.New(rand.NewPCG(3, 4)), ledgertest.Spec{Sessions: 1, Calls: 3, Prefix: "more-", FirstEvent: 1000})
	ledgertest.Publish(t, js, more.Messages)
	ledgertest.WaitCaughtUp(t, js) // run is under way
	require.Equal(t, int64(projection.MemoryLimit), debug.SetMemoryLimit(-1))
	cancel()
	select {
	case code := <-done:
		require.Equal(t, cli.ExitOK, code)
	case <-time.After(time.Minute):
		t.Fatal("aggregator run did not stop")
	}
}

// TestRunBatchDefaultIsTheLibrarys: the shipped command's batch size is the
// one the library defaults to, which the benchmarks measure, and its help
// says it.
func TestRunBatchDefaultIsTheLibrarys(t *testing.T) {
	code, _, stderr := run(t, "run", "-h")
	require.Contains(t, stderr, "-batch int")
	require.Contains(t, stderr, "(default "+strconv.Itoa(projection.DefaultBatchSize)+")")
	require.Equal(t, 20_000, projection.DefaultBatchSize)
	require.Equal(t, cli.ExitOK, code, "-h is not an error")
}
