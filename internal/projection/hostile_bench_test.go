package projection

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
)

// Environment of the child process of BenchmarkHostileInputPeakRSS.
const (
	childURLEnv   = "LEDGER_HOSTILE_CHILD_URL"
	childLastEnv  = "LEDGER_HOSTILE_CHILD_LAST"
	childNamesEnv = "LEDGER_HOSTILE_CHILD_NAMES"
	childPeakLine = "hostile-child-vmhwm-kib="
)

// BenchmarkHostileInputPeakRSS measures the aggregator's peak RSS (VmHWM)
// under the hostile input of issue 8, in a child process of its own (this
// test binary again) so that the embedded server's memory does not count:
// a stream created before LEDGER_ATTEMPTS had a MaxMsgSize, holding 1,500
// invalid events of 700 KiB each (a huge error.message), the fat request
// (1,001 attempts with worst-case models) and valid events before and
// after, on a server with the default 1 MiB max_payload. The target is
// under 256 MiB. Run it without -race (the race detector multiplies
// memory):
//
//	go test -run '^$' -bench HostileInputPeakRSS -benchtime 1x ./internal/projection/
//
// LEDGER_HOSTILE_EVENTS and LEDGER_HOSTILE_KIB change the count and size
// of the invalid events.
func BenchmarkHostileInputPeakRSS(b *testing.B) {
	bad, kib := envInt(b, "LEDGER_HOSTILE_EVENTS", 1500), envInt(b, "LEDGER_HOSTILE_KIB", 700)
	e := newEnvOn(b, true)
	before := evSpec{n: 1, session: "S-before", request: "R-before", attempt: 0, success: true, in: 3, out: 4}.wire(b)
	e.publish(before)
	for i := range bad {
		publishAsync(b, e, hugeInvalid(b, 10+i, kib<<10))
	}
	for _, w := range fatRequest(b, "S-fat", "R-fat", 10+bad) {
		publishAsync(b, e, w)
	}
	for i := range 1000 {
		publishAsync(b, e, evSpec{n: 2000 + bad + i, session: fmt.Sprintf("S%d", i%10), request: fmt.Sprintf("R-after-%d", i),
			attempt: 0, success: true, in: 1, out: 2}.wire(b))
	}
	select {
	case <-e.js.PublishAsyncComplete():
	case <-time.After(5 * time.Minute):
		b.Fatal("publishing did not complete within 5 minutes")
	}
	last := e.lastSeq()
	b.Logf("stream: %d messages, %d of them %d KiB invalid events", last, bad, kib)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Each run projects into resources of its own, from the start.
		names := fmt.Sprintf("h%d", i)
		start := time.Now()
		peak := runHostileChild(b, e.ss.URL(), last, names)
		b.ReportMetric(float64(peak)/1024, "peak-rss-MiB")
		b.ReportMetric(float64(last)/time.Since(start).Seconds(), "events/s")
		if peak > 256<<10 {
			b.Errorf("peak RSS %d MiB is over the 256 MiB target", peak>>10)
		}
		requireHostileLedger(b, e, hostileNames(names), bad)
	}
}

// runHostileChild runs TestHostileChild in a child process and returns
// its peak RSS in KiB.
func runHostileChild(b *testing.B, url string, last uint64, names string) uint64 {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestHostileChild$", "-test.v")
	cmd.Env = append(os.Environ(), childURLEnv+"="+url, childLastEnv+"="+strconv.FormatUint(last, 10), childNamesEnv+"="+names)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(b, err, "child: %s\n%s", out, stderr.String())
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), childPeakLine); ok {
			kib, err := strconv.ParseUint(v, 10, 64)
			require.NoError(b, err)
			return kib
		}
	}
	b.Fatalf("the child reported no peak RSS:\n%s", out)
	return 0
}

// hostileNames are the resources of one run.
func hostileNames(suffix string) Names {
	return Names{Requests: "hostile_requests_" + suffix, Sessions: "hostile_sessions_" + suffix, State: "hostile_state_" + suffix,
		Rejected: "HOSTILE_REJECTED_" + suffix, RejectedPrefix: "hostile.rejected." + suffix + "."}
}

// requireHostileLedger checks what a run left: every invalid event
// rejected once, the fat request whole, the events after it counted.
func requireHostileLedger(b *testing.B, e *env, n Names, bad int) {
	b.Helper()
	ctx := context.Background()
	rej, err := e.js.Stream(ctx, n.Rejected)
	require.NoError(b, err)
	info, err := rej.Info(ctx)
	require.NoError(b, err)
	require.EqualValues(b, bad, info.State.Msgs)
	ses, err := e.js.KeyValue(ctx, n.Sessions)
	require.NoError(b, err)
	session := func(id string) Session {
		entry, err := ses.Get(ctx, id)
		require.NoError(b, err)
		var s Session
		require.NoError(b, json.Unmarshal(entry.Value(), &s))
		return s
	}
	var total int64
	for i := range 10 {
		total += session(fmt.Sprintf("S%d", i)).Requests
	}
	require.EqualValues(b, 1000, total, "every event after the hostile ones counted")
	require.EqualValues(b, events.MaxAttempt+1, session("S-fat").Attempts)
}

// TestHostileChild is the child process of BenchmarkHostileInputPeakRSS:
// it runs the aggregator under the command's memory limit until it has
// applied the whole stream, then prints its peak RSS. It skips itself
// unless the benchmark started it.
func TestHostileChild(t *testing.T) {
	url := os.Getenv(childURLEnv)
	if url == "" {
		t.Skip("run by BenchmarkHostileInputPeakRSS")
	}
	last, err := strconv.ParseUint(os.Getenv(childLastEnv), 10, 64)
	require.NoError(t, err)
	LimitMemory()
	nc, err := nats.Connect(url)
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	names := hostileNames(os.Getenv(childNamesEnv))
	agg, err := New(Config{JS: js, Names: names, LeaseTTL: time.Second})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- agg.Run(ctx) }()
	require.Eventually(t, func() bool { return agg.Applied() >= last }, 10*time.Minute, 10*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	fmt.Printf("%s%d\n", childPeakLine, vmHWMKiB(t))
}

// vmHWMKiB reads this process's peak RSS from /proc/self/status.
func vmHWMKiB(t *testing.T) uint64 {
	data, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			require.NoError(t, err)
			return kib
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}

func envInt(b *testing.B, name string, def int) int {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(b, err, name)
	return n
}
