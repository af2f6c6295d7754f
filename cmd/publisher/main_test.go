package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/cli"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/proctest"
	"github.com/agentledger/ledger/internal/sim/fakeprovider"
)

// TestMain silences the standard logger, through which genai reports every
// stream that fails, as the stalled ones here do on purpose.
//
// A process started by a --processes parent or by package proctest (this
// test binary standing in for the command) runs the command instead of
// the tests.
func TestMain(m *testing.M) {
	if os.Getenv(reexecEnv) == "1" {
		main()
	}
	proctest.Main(main)
	log.SetOutput(io.Discard)
	os.Exit(m.Run())
}

// runCmd runs the command line and returns its exit code and output.
func runCmd(t *testing.T, ctx context.Context, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(ctx, args, strings.NewReader(stdin), &out, &errb)
	return cli.Code(err), out.String(), errb.String()
}

func validEvent(t *testing.T, session, request string, attempt int) (*events.Attempt, string) {
	t.Helper()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(attempt) * time.Second)
	ev := &events.Attempt{
		Schema: events.SchemaV1, EventID: ulid.Make().String(), RequestID: request, SessionID: session,
		Attempt: attempt, Outcome: events.OutcomeSuccess, Final: true, Provider: "anthropic", Model: "claude-x",
		Usage:     events.Usage{InputTokens: 100, OutputTokens: 20},
		StartedAt: start, FinishedAt: start.Add(time.Second),
	}
	b, err := events.Marshal(ev)
	require.NoError(t, err)
	return ev, string(b)
}

// streamMessages returns the messages of LEDGER_ATTEMPTS, by sequence.
func streamMessages(t *testing.T, js jetstream.JetStream, want int) []*jetstream.RawStreamMsg {
	t.Helper()
	s, err := js.Stream(t.Context(), names.AttemptsStream)
	require.NoError(t, err)
	info, err := s.Info(t.Context())
	require.NoError(t, err)
	require.Equal(t, uint64(want), info.State.Msgs)
	msgs := make([]*jetstream.RawStreamMsg, 0, want)
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && want > 0; seq++ {
		m, err := s.GetMsg(t.Context(), seq)
		require.NoError(t, err)
		msgs = append(msgs, m)
	}
	return msgs
}

func TestIngestMixedFile(t *testing.T) {
	srv, _, js := natstest.StartJS(t)
	ev1, line1 := validEvent(t, "sess-a", "req-1", 0)
	ev2, line2 := validEvent(t, "sess-b", "req-2", 0)
	_, badSession := validEvent(t, "sess-c", "req-3", 0)
	badSession = strings.Replace(badSession, `"session_id":"sess-c"`, `"session_id":"bad.session"`, 1)
	_, unknownSchema := validEvent(t, "sess-d", "req-4", 0)
	unknownSchema = strings.Replace(unknownSchema, events.SchemaV1, "ledger.attempt.v9", 1)
	huge := `{"schema":"` + strings.Repeat("x", 200_000) + `"}` // longer than bufio.Scanner's default limit
	lines := []string{
		line1,              // 1 valid
		"",                 // 2 blank
		`{"schema": nope}`, // 3 malformed
		badSession,         // 4 invalid field
		"   ",              // 5 blank
		unknownSchema,      // 6 unknown schema
		huge,               // 7 invalid, long
		line2 + "\r",       // 8 valid, CRLF
	}
	path := filepath.Join(t.TempDir(), "events.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644))

	code, stdout, stderr := runCmd(t, t.Context(), "", "ingest", "--create-stream", "--nats-url", srv.URL(), "--json", path)
	require.Equal(t, cli.ExitFailed, code, "invalid lines make the exit status 1; stderr: %s", stderr)
	assert.Contains(t, stderr, "line 3: malformed_json: ")
	assert.Contains(t, stderr, "line 4: invalid_field: session_id")
	assert.Contains(t, stderr, "line 6: unknown_schema: ")
	assert.Contains(t, stderr, fmt.Sprintf("line 7: too_large: the body is %d bytes; an event body is at most %d bytes", len(huge), events.MaxEventBytes))
	for _, n := range []int{1, 2, 5, 8} {
		assert.NotContains(t, stderr, fmt.Sprintf("line %d:", n))
	}

	var sum ingestSummary
	require.NoError(t, json.Unmarshal([]byte(stdout), &sum), stdout)
	assert.Equal(t, int64(8), sum.Lines)
	assert.Equal(t, int64(2), sum.Valid)
	assert.Equal(t, int64(4), sum.Invalid)
	assert.Equal(t, int64(2), sum.Blank)
	assert.Equal(t, uint64(2), sum.Events.Acked)
	assert.Zero(t, sum.Events.Undelivered)

	msgs := streamMessages(t, js, 2)
	for i, want := range []*events.Attempt{ev1, ev2} {
		assert.Equal(t, events.Subject(want.SessionID, want.RequestID), msgs[i].Subject)
		assert.Equal(t, want.EventID, msgs[i].Header.Get(jetstream.MsgIDHeader))
		got, err := events.Decode(msgs[i].Data)
		require.NoError(t, err)
		assert.Equal(t, want.EventID, got.EventID)
		assert.Equal(t, want.Usage, got.Usage)
	}

	// Ingesting the same file again lands nothing new: the event IDs are
	// deduplicated by the stream.
	code, stdout, _ = runCmd(t, t.Context(), "", "ingest", "--create-stream", "--nats-url", srv.URL(), path)
	require.Equal(t, cli.ExitFailed, code)
	assert.Contains(t, stdout, "2 acked (2 duplicates)")
	streamMessages(t, js, 2)
}

func TestIngestStdinAllValid(t *testing.T) {
	srv, _, js := natstest.StartJS(t)
	var in strings.Builder
	for i := range 50 {
		_, line := validEvent(t, "sess", fmt.Sprintf("req-%d", i), 0)
		in.WriteString(line + "\n")
	}
	code, stdout, stderr := runCmd(t, t.Context(), in.String(), "ingest", "--create-stream", "--nats-url", srv.URL(), "-")
	require.Equal(t, cli.ExitOK, code, stderr)
	assert.Contains(t, stdout, "lines 50: 50 valid, 0 invalid, 0 blank")
	streamMessages(t, js, 50)
}

func TestIngestMaxLine(t *testing.T) {
	srv, _, js := natstest.StartJS(t)
	_, line := validEvent(t, "sess", "req", 0)
	in := line + "\n" + line + strings.Repeat(" ", 100) + "\n"
	code, _, stderr := runCmd(t, t.Context(), in, "ingest", "--create-stream", "--nats-url", srv.URL(), "--max-line-bytes", fmt.Sprint(len(line)+10))
	require.Equal(t, cli.ExitFailed, code)
	assert.Contains(t, stderr, fmt.Sprintf("line 2: too_long: the line is %d bytes", len(line)+100))
	streamMessages(t, js, 1)
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return "nats://" + addr
}

func TestUsageAndConnectionErrors(t *testing.T) {
	dead := closedPort(t)
	tests := []struct {
		name string
		args []string
		want string // in the error or on stderr
	}{
		{"no command", nil, "usage:"},
		{"unknown command", []string{"publish"}, `unknown command "publish"`},
		{"ingest: unknown flag", []string{"ingest", "--no-such-flag"}, "flag provided but not defined"},
		{"ingest: two files", []string{"ingest", "a", "b"}, "at most one FILE"},
		{"ingest: missing file", []string{"ingest", "--nats-url", dead, filepath.Join(t.TempDir(), "missing")}, "no such file"},
		{"ingest: bad max line", []string{"ingest", "--max-line-bytes", "0"}, "--max-line-bytes"},
		{"ingest: bad drain timeout", []string{"ingest", "--drain-timeout", "0s"}, "--drain-timeout"},
		{"ingest: NATS unreachable", []string{"ingest", "--nats-url", dead}, dead},
		{"ingest: bad labels", []string{"ingest", "--labels", "Team=x"}, `-labels: labels["Team"]: key must be a lower-case letter`},
		{"simulate: zero agents", []string{"simulate", "--agents", "0"}, "--agents"},
		{"simulate: negative sessions", []string{"simulate", "--sessions", "-2"}, "--sessions"},
		{"simulate: zero calls", []string{"simulate", "--calls", "0"}, "--calls"},
		{"simulate: bad run id", []string{"simulate", "--run-id", "a.b"}, "--run-id"},
		{"simulate: bad mix", []string{"simulate", "--rate-limit", "0.9", "--overload", "0.5"}, "fault mix"},
		{"simulate: negative probability", []string{"simulate", "--bad-request", "-1"}, "bad_request"},
		{"simulate: unknown provider", []string{"simulate", "--providers", "anthropic,mistral"}, "--providers"},
		{"simulate: bad attempt timeout", []string{"simulate", "--attempt-timeout", "0s"}, "--attempt-timeout"},
		{"simulate: bad retries", []string{"simulate", "--max-retries", "-1"}, "--max-retries"},
		{"simulate: argument", []string{"simulate", "extra"}, "no arguments"},
		{"simulate: bad labels", []string{"simulate", "--labels", "team="}, `-labels: labels["team"]: value must be 1 to 128 bytes, got 0`},
		{"simulate: bad teams", []string{"simulate", "--teams", "-1"}, "--teams: "},
		{"simulate: NATS unreachable", []string{"simulate", "--nats-url", dead}, dead},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			err := run(t.Context(), tt.args, strings.NewReader(""), &out, &errb)
			require.Error(t, err)
			assert.Equal(t, cli.ExitUsage, cli.Code(err), "%v", err)
			assert.Contains(t, err.Error()+errb.String(), tt.want)
		})
	}

	var out, errb bytes.Buffer
	err := run(t.Context(), []string{"simulate", "-h"}, nil, &out, &errb)
	assert.Equal(t, cli.ExitOK, cli.Code(err))
	assert.Contains(t, errb.String(), "-billed-timeout")
}

func TestSimulateLandsEveryAttempt(t *testing.T) {
	srv, _, js := natstest.StartJS(t)
	truthPath := filepath.Join(t.TempDir(), "truth.json")
	code, stdout, stderr := runCmd(t, t.Context(), "", "simulate", "--create-stream", "--nats-url", srv.URL(),
		"--agents", "4", "--sessions", "6", "--calls", "5", "--seed", "5", "--run-id", "cmdtest",
		"--rate-limit", "0.2", "--billed-timeout", "0.1", "--bad-request", "0.05",
		"--attempt-timeout", "200ms", "--progress", "0", "--truth", truthPath, "--json")
	require.Equal(t, cli.ExitOK, code, stderr)

	var sum simulateSummary
	require.NoError(t, json.Unmarshal([]byte(stdout), &sum), stdout)
	assert.Equal(t, "cmdtest", sum.RunID)
	assert.Equal(t, int64(30), sum.Fleet.Calls)
	assert.False(t, sum.Interrupted)
	assert.Positive(t, sum.Fleet.Retries)
	assert.Equal(t, uint64(sum.Fleet.Attempts), sum.Events.Acked)
	assert.Zero(t, sum.Events.Undelivered)
	// An attempt that timed out before reaching the provider has an event
	// the provider never saw; it bills nothing.
	assert.LessOrEqual(t, sum.Truth.Attempts, sum.Fleet.Attempts)
	assert.Equal(t, sum.Truth.Billed, sum.Fleet.Billed)
	assert.Equal(t, sum.Truth.Billed.Sub(sum.Truth.Usage), sum.Truth.Overhead)

	// Every attempt is in the stream, valid and on its subject.
	msgs := streamMessages(t, js, int(sum.Fleet.Attempts))
	var billed events.Usage
	for _, m := range msgs {
		ev, err := events.Decode(m.Data)
		require.NoError(t, err)
		require.NoError(t, events.CheckSubject(m.Subject, ev))
		assert.Equal(t, ev.EventID, m.Header.Get(jetstream.MsgIDHeader))
		billed = billed.Add(ev.Usage)
	}
	assert.Equal(t, sum.Truth.Billed, billed)

	var truth fakeprovider.Truth
	b, err := os.ReadFile(truthPath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &truth))
	assert.Equal(t, sum.Truth.Tally, truth.Total)
	assert.Len(t, truth.Sessions, 6)
	assert.Len(t, truth.Requests, 30)
	assert.Equal(t, uint64(5), truth.Seed)
}

func TestSimulateTextSummaryAndProgress(t *testing.T) {
	srv, _, _ := natstest.StartJS(t)
	code, stdout, stderr := runCmd(t, t.Context(), "", "simulate", "--create-stream", "--nats-url", srv.URL(),
		"--sessions", "3", "--calls", "3", "--billed-timeout", "0", "--progress", "1ms")
	require.Equal(t, cli.ExitOK, code, stderr)
	assert.Regexp(t, `run sim-[0-9a-f]{8} \(seed 1\) done`, stdout)
	assert.Contains(t, stdout, "calls      9 of 9")
	assert.Contains(t, stdout, "0 undelivered")
	assert.Contains(t, stdout, "overhead in ")
	assert.Contains(t, stderr, "progress: calls ")
}

func TestSimulateInterruptedFlushes(t *testing.T) {
	srv, _, js := natstest.StartJS(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// Cancel (as SIGINT would) once events are arriving in the stream.
	go func() {
		for ctx.Err() == nil {
			st, err := js.Stream(ctx, names.AttemptsStream)
			if err == nil {
				if info, err := st.Info(ctx); err == nil && info.State.Msgs >= 20 {
					cancel()
					return
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	code, stdout, stderr := runCmd(t, ctx, "", "simulate", "--create-stream", "--nats-url", srv.URL(),
		"--sessions", "1000", "--calls", "100", "--progress", "0", "--json")
	require.Equal(t, cli.ExitUsage, code, stderr)
	var sum simulateSummary
	require.NoError(t, json.Unmarshal([]byte(stdout), &sum), stdout)
	assert.True(t, sum.Interrupted)
	assert.Less(t, sum.Fleet.Calls, int64(100_000))
	assert.Zero(t, sum.Events.Undelivered, "what was enqueued is flushed")
	assert.Equal(t, uint64(sum.Fleet.Attempts), sum.Events.Acked)
	streamMessages(t, js, int(sum.Fleet.Attempts))
}
