package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/cli"
	"github.com/agentledger/ledger/internal/ledgertest"
	"github.com/agentledger/ledger/internal/natstest"
)

func eventLines(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	for i := range n {
		_, line := validEvent(t, "sess-role", fmt.Sprintf("req-%d", i), 0)
		b.WriteString(line + "\n")
	}
	return b.String()
}

// publisher ingest runs with exactly the publisher role of the shipped
// example; a publisher role missing one grant is told which, at once.
func TestIngestWithThePublisherRole(t *testing.T) {
	for _, c := range []struct {
		without string // a grant taken away; "" for the role as shipped
		want    string // the subject the error names
	}{
		{"", ""},
		{"$JS.API.STREAM.INFO.LEDGER_ATTEMPTS", `may not publish to "$JS.API.STREAM.INFO.LEDGER_ATTEMPTS"`},
		{"ledger.attempts.>", `may not publish to "ledger.attempts.sess-role.req-`},
		{"_INBOX_publisher.>", `may not subscribe to "_INBOX_publisher.`},
	} {
		t.Run("without "+c.without, func(t *testing.T) {
			var options []natstest.Option
			if c.without != "" {
				options = append(options, natstest.WithoutGrant("publisher", c.without))
			}
			srv := ledgertest.StartRoles(t, options...)
			var stdout, stderr bytes.Buffer
			begin := time.Now()
			err := run(t.Context(), append([]string{"ingest"}, srv.RoleArgs("publisher")...), strings.NewReader(eventLines(t, 20)), &stdout, &stderr)
			took := time.Since(begin)
			if c.want == "" {
				require.NoError(t, err, stderr.String())
				assert.Contains(t, stdout.String(), "20 acked")
				assert.NotContains(t, stderr.String(), "permission")
				return
			}
			t.Logf("after %s: %v", took, err)
			assert.Equal(t, cli.ExitUsage, cli.Code(err))
			assert.ErrorContains(t, err, c.want)
			assert.Less(t, took, 3*time.Second, "not a timeout")
		})
	}
}

// An agent that shares the fleet's limits (simulate --fleet-limits on)
// runs with exactly the agent role of the shipped example; the publisher
// role, which has no KV, is refused with the subject named.
func TestSimulateFleetLimitsWithTheAgentRole(t *testing.T) {
	for _, c := range []struct {
		role string
		want string // the subject the error names; "" for success
	}{
		{"agent", ""},
		{"publisher", `may not publish to "$JS.API.STREAM.INFO.KV_ledger_upstreams"`},
	} {
		t.Run(c.role, func(t *testing.T) {
			srv := ledgertest.StartRoles(t)
			args := append([]string{"simulate", "--fleet-limits", "on", "--sessions", "2", "--calls", "3",
				"--rate-limit", "0", "--overload", "0", "--server-error", "0", "--billed-timeout", "0", "--bad-request", "0",
				"--progress", "0"}, srv.RoleArgs(c.role)...)
			var stdout, stderr bytes.Buffer
			begin := time.Now()
			err := run(t.Context(), args, strings.NewReader(""), &stdout, &stderr)
			took := time.Since(begin)
			if c.want == "" {
				require.NoError(t, err, stderr.String())
				assert.Contains(t, stdout.String(), "6 acked")
				assert.NotContains(t, stderr.String(), "permission")
				return
			}
			assert.Equal(t, cli.ExitUsage, cli.Code(err))
			assert.ErrorContains(t, err, c.want)
			assert.NotContains(t, err.Error(), "not ready within", "a refusal, not a timeout")
			// Told at once: the fleet that never became ready does not
			// wait out its maintainer's refused request (it took 2 s).
			assert.Less(t, took, time.Second, "reported within a second")
		})
	}
}
