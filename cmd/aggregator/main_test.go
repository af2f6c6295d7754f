package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/cli"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/ledgertest"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/projection"
	"github.com/agentledger/ledger/internal/topology"
)

// run runs the aggregator command line and returns its exit code and
// outputs.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := command(ctx, args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// aggregator runs a live aggregator (apply nil: the current code) until the
// returned stop is called.
func aggregator(t *testing.T, js jetstream.JetStream, apply func(*projection.Request, *events.Attempt) bool) (stop func()) {
	t.Helper()
	return ledgertest.RunAggregator(t, js, projection.Config{Apply: apply, BatchSize: 11})
}

// liveLedger reads every record of the live buckets.
func liveLedger(t *testing.T, js jetstream.JetStream) (map[string]projection.RequestView, map[string]projection.Totals) {
	t.Helper()
	ctx := context.Background()
	reqs := map[string]projection.RequestView{}
	require.NoError(t, projection.ReadAll(ctx, js, names.RequestsBucket, func(k string, v []byte) error {
		var r projection.Request
		if err := json.Unmarshal(v, &r); err != nil {
			return err
		}
		reqs[k] = r.View()
		return nil
	}))
	sess := map[string]projection.Totals{}
	require.NoError(t, projection.ReadAll(ctx, js, names.SessionsBucket, func(k string, v []byte) error {
		var s projection.Session
		if err := json.Unmarshal(v, &s); err != nil {
			return err
		}
		sess[k] = s.Totals
		return nil
	}))
	return reqs, sess
}

type driftJSON struct {
	Identical        bool  `json:"identical"`
	SessionsChecked  int   `json:"sessions_checked"`
	RequestsChecked  int   `json:"requests_checked"`
	SessionsDiffer   int   `json:"sessions_differ"`
	UsageTokenDelta  int64 `json:"usage_token_delta"`
	BilledTokenDelta int64 `json:"billed_token_delta"`
	Differences      []struct {
		Kind, ID, Field string
		Delta           *int64
	} `json:"differences"`
}

// The bug-fix story end to end: a ledger projected by the classic bug
// (usage sums every attempt) is found by verify, session by session, with
// exit 1; rebuild under the fixed code while the live aggregator runs and
// a publisher keeps publishing; verify then exits 0, and every record
// equals the model of every published event.
func TestBugFixStory(t *testing.T) {
	srv, _, js := natstest.StartJS(t)
	url := srv.URL()
	_, err := topology.EnsureAttempts(context.Background(), js, topology.Config{})
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(42, 43))
	before := ledgertest.Generate(rng, ledgertest.Spec{Sessions: 6, Calls: 150, Prefix: "a-"})
	during := ledgertest.Generate(rng, ledgertest.Spec{Sessions: 8, Calls: 150, Prefix: "b-", FirstEvent: 10_000})
	all := before.Merge(during)

	ledgertest.Publish(t, js, before.Messages)
	stopBuggy := aggregator(t, js, ledgertest.SumEveryAttempt)
	ledgertest.WaitCaughtUp(t, js)
	stopBuggy()

	// verify: exit 1 with the exact per-session deltas.
	code, out, stderr := run(t, "verify", "--nats-url", url, "--json", "--limit", "0")
	require.Equal(t, cli.ExitFailed, code, "stderr: %s", stderr)
	var d driftJSON
	require.NoError(t, json.Unmarshal([]byte(out), &d), out)
	require.False(t, d.Identical)
	want := map[string]int64{}
	var overhead int64
	for id, s := range before.Sessions {
		o := s.Billed.Sub(s.Usage)
		overhead += o.InputTokens + o.OutputTokens
		if o.InputTokens != 0 {
			want[id] = o.InputTokens
		}
	}
	got := map[string]int64{}
	for _, df := range d.Differences {
		if df.Kind == "session" && df.Field == "usage.input_tokens" {
			got[df.ID] = *df.Delta
		}
	}
	require.Equal(t, want, got)
	require.Equal(t, overhead, d.UsageTokenDelta)
	require.Zero(t, d.BilledTokenDelta)
	require.Equal(t, len(before.Sessions), d.SessionsChecked)
	require.Equal(t, len(before.Requests), d.RequestsChecked)

	// The table says the same for people.
	code, out, _ = run(t, "verify", "--nats-url", url)
	require.Equal(t, cli.ExitFailed, code)
	require.Contains(t, out, "KIND")
	require.Contains(t, out, "usage.input_tokens")
	require.Contains(t, out, "live minus recomputed: usage "+signed(overhead)+" tokens, billed 0 tokens")

	// rebuild under the fixed code, live and while publishing.
	aggregator(t, js, nil)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < len(during.Messages); i += 7 {
			ledgertest.Publish(t, js, during.Messages[i:min(i+7, len(during.Messages))])
		}
	}()
	code, out, stderr = run(t, "rebuild", "--nats-url", url, "--lease-ttl", "1s", "--batch", "17")
	require.Equal(t, cli.ExitOK, code, "stderr: %s", stderr)
	require.Contains(t, out, "rebuilt the ledger")
	wg.Wait()
	ledgertest.WaitCaughtUp(t, js)

	code, out, stderr = run(t, "verify", "--nats-url", url)
	require.Equal(t, cli.ExitOK, code, "out: %s\nstderr: %s", out, stderr)
	require.Contains(t, out, ": identical")
	reqs, sess := liveLedger(t, js)
	require.Equal(t, all.Requests, reqs)
	require.Equal(t, all.Sessions, sess)
}

// report --at gives the totals of exactly the events stored up to then;
// verify exits 2 when it cannot run.
func TestReportAtAndErrors(t *testing.T) {
	srv, js, stream, first, second := twoWorkloads(t, 5, 6, 20)
	url := srv.URL()
	ctx := context.Background()
	ledgertest.Publish(t, js, first.Messages)
	info, err := stream.Info(ctx)
	require.NoError(t, err)
	cut := info.State.LastSeq
	m, err := stream.GetMsg(ctx, cut)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return time.Now().After(m.Time) }, time.Second, time.Millisecond)
	ledgertest.Publish(t, js, second.Messages)

	wantFirst := first.Sessions["sess-0"]
	for _, args := range [][]string{
		{"--at", m.Time.Format(time.RFC3339Nano)},
		{"--at-seq", strconvU(cut)},
	} {
		code, out, stderr := run(t, append([]string{"report", "--nats-url", url, "--json"}, args...)...)
		require.Equal(t, cli.ExitOK, code, stderr)
		var l struct {
			Total   projection.Totals `json:"total"`
			Applied uint64            `json:"applied_seq"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &l))
		require.Equal(t, wantFirst, l.Total, "%v", args)
		require.Equal(t, cut, l.Applied)
	}
	code, out, _ := run(t, "report", "--nats-url", url, "--at-seq", strconvU(info.State.LastSeq+1000))
	require.Equal(t, cli.ExitOK, code)
	require.Contains(t, out, "sess-0", "a point past the end is the whole stream")

	code, _, stderr := run(t, "report", "--nats-url", url, "--at", "yesterday")
	require.Equal(t, cli.ExitUsage, code)
	require.Contains(t, stderr, "--at")
	code, _, stderr = run(t, "verify", "--nats-url", url, "--limit", "-1")
	require.Equal(t, cli.ExitUsage, code)
	require.Contains(t, stderr, "--limit")
	code, _, stderr = run(t, "verify", "--nats-url", "nats://127.0.0.1:1")
	require.Equal(t, cli.ExitUsage, code, stderr)
}

func strconvU(n uint64) string { return strconv.FormatUint(n, 10) }

// A ledger rebuilt with --accept-loss says so whenever it is reported: the
// totals leave out the events the stream had lost.
func TestReportNotesAcceptedLoss(t *testing.T) {
	srv, _, js := natstest.StartJS(t)
	ctx := context.Background()
	cfg, err := topology.AttemptsStreamConfig(topology.Config{})
	require.NoError(t, err)
	w := ledgertest.Generate(rand.New(rand.NewPCG(15, 5)), ledgertest.Spec{Sessions: 1, Calls: 20})
	_, err = js.CreateStream(ctx, cfg)
	require.NoError(t, err)
	ledgertest.Publish(t, js, w.Messages)
	s, err := js.Stream(ctx, names.AttemptsStream)
	require.NoError(t, err)
	cfg = s.CachedInfo().Config
	cfg.MaxMsgs = 10
	_, err = js.UpdateStream(ctx, cfg)
	require.NoError(t, err)

	code, _, stderr := run(t, "rebuild", "--nats-url", srv.URL(), "--lease-ttl", "1s")
	require.Equal(t, cli.ExitUsage, code)
	require.Contains(t, stderr, "--accept-loss")
	code, out, stderr := run(t, "rebuild", "--nats-url", srv.URL(), "--lease-ttl", "1s", "--accept-loss")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Contains(t, out, "projected 10 events", "the events the stream still held, not its last sequence")
	code, out, stderr = run(t, "report", "--nats-url", srv.URL())
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Contains(t, out, "sess-0")
	require.Regexp(t, `note: the ledger was rebuilt without events 1 to \d+ of LEDGER_ATTEMPTS`, stderr)
}

// wait that gives up says how far the ledger got: its checkpoint, not 0
// (the read at the deadline failed and used to overwrite it).
func TestWaitTimeoutSaysTheCheckpoint(t *testing.T) {
	srv, js, _, before, after := twoWorkloads(t, 7, 8, 5)
	ctx := context.Background()
	ledgertest.Publish(t, js, before.Messages)
	stop := aggregator(t, js, nil)
	ledgertest.WaitCaughtUp(t, js)
	stop()
	checkpoint, err := projection.ReadCheckpoint(ctx, js)
	require.NoError(t, err)
	require.Positive(t, checkpoint)
	ledgertest.Publish(t, js, after.Messages)

	code, _, stderr := run(t, "wait", "--nats-url", srv.URL(), "--timeout", "200ms")
	require.Equal(t, cli.ExitFailed, code, stderr)
	require.Contains(t, stderr, fmt.Sprintf("applied %d of %d", checkpoint, uint64(len(before.Messages)+len(after.Messages))))
}

// twoWorkloads starts a server with LEDGER_ATTEMPTS and generates two
// workloads of one session and calls calls each, sessions "a-" and "b-".
func twoWorkloads(t *testing.T, seed1, seed2 uint64, calls int) (*natstest.Server, jetstream.JetStream, jetstream.Stream, *ledgertest.Workload, *ledgertest.Workload) {
	t.Helper()
	srv, _, js := natstest.StartJS(t)
	stream, err := topology.EnsureAttempts(context.Background(), js, topology.Config{})
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(seed1, seed2))
	first := ledgertest.Generate(rng, ledgertest.Spec{Sessions: 1, Calls: calls, Prefix: "a-"})
	second := ledgertest.Generate(rng, ledgertest.Spec{Sessions: 1, Calls: calls, Prefix: "b-", FirstEvent: 10_000})
	return srv, js, stream, first, second
}
