package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/emit"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/proctest"
	"github.com/agentledger/ledger/internal/topology"
)

func outboxEvents(t *testing.T, dir string) int {
	t.Helper()
	info, err := emit.InspectOutbox(dir)
	require.NoError(t, err)
	return info.Events
}

func streamCount(ctx context.Context, js jetstream.JetStream) uint64 {
	s, err := js.Stream(ctx, names.AttemptsStream)
	if err != nil {
		return 0
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0
	}
	return info.State.Msgs
}

// A publisher killed with SIGKILL during a NATS outage loses no event:
// the next run on the same --outbox delivers them, and those delivered
// before the outage are not stored twice.
func TestSIGKILLDuringAnOutageLosesNoEvent(t *testing.T) {
	const before, during = 5, 40
	srv := natstest.Start(t)
	_, js := srv.Connect(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	_, err := topology.EnsureAttempts(ctx, js, topology.Config{})
	require.NoError(t, err)
	outbox := t.TempDir()

	pr, pw, err := os.Pipe() // the child reads the pipe itself: no copying goroutine here
	require.NoError(t, err)
	t.Cleanup(func() { _ = pw.Close() })
	child := proctest.Start(t, pr, "ingest", "--nats-url", srv.URL(), "--outbox", outbox, "--log-level", "debug")
	require.NoError(t, pr.Close())
	ids := map[string]bool{}
	send := func(prefix string, n int) {
		for i := range n {
			ev, line := validEvent(t, "sess-kill", fmt.Sprintf("%s-%d", prefix, i), 0)
			ids[ev.EventID] = true
			_, err := io.WriteString(pw, line+"\n")
			require.NoError(t, err)
		}
	}
	send("before", before)
	require.Eventually(t, func() bool { return streamCount(ctx, js) == before && outboxEvents(t, outbox) == 0 },
		30*time.Second, 10*time.Millisecond, "events before the outage acked and reclaimed; stderr:\n%s", child.Stderr)

	srv.Shutdown() // the outage
	send("during", during)
	require.Eventually(t, func() bool { return outboxEvents(t, outbox) == during },
		30*time.Second, 10*time.Millisecond, "events of the outage on disk; stderr:\n%s", child.Stderr)
	require.NoError(t, child.Cmd.Process.Signal(syscall.SIGKILL))
	_ = pw.Close()
	err = child.Cmd.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, syscall.SIGKILL, exit.Sys().(syscall.WaitStatus).Signal())

	_, js = srv.Restart(t).Connect(t) // NATS is back
	again := proctest.Start(t, nil, "ingest", "--nats-url", srv.URL(), "--outbox", outbox, "--json")
	require.NoError(t, again.Cmd.Wait(), "stderr:\n%s", again.Stderr)
	assert.Contains(t, again.Stdout.String(), fmt.Sprintf(`"recovered": %d`, during))

	got := readStream(t, js)
	assert.Len(t, got, before+during, "every event once")
	for id := range ids {
		assert.Equal(t, 1, got[id], "event %s", id)
	}
	assert.Zero(t, outboxEvents(t, outbox))
}

// readStream counts the copies of each event ID in LEDGER_ATTEMPTS.
func readStream(t *testing.T, js jetstream.JetStream) map[string]int {
	t.Helper()
	out := map[string]int{}
	n := int(streamCount(t.Context(), js))
	for _, m := range streamMessages(t, js, n) {
		out[m.Header.Get(jetstream.MsgIDHeader)]++
	}
	return out
}
