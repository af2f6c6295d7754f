package main

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/ledgertest"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/testkit"
)

// as adds the connection flags of role on srv to args.
func as(srv *natstest.Server, role string, args ...string) []string {
	return append(args, srv.RoleArgs(role)...)
}

// runAs runs one subcommand to its end.
func runAs(t *testing.T, ctx context.Context, args []string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = command(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

// Every subcommand runs on a server configured by the shipped roles
// example with exactly its role's permissions: run as aggregator, wait,
// report and verify as reader, rebuild as operator; events come from the
// publisher role.
func TestEveryCommandRunsWithItsRoleOnly(t *testing.T) {
	srv := natstest.StartRoles(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	runCtx, stopRun := context.WithCancel(ctx)
	var runErr testkit.Logs
	done := make(chan int, 1)
	go func() {
		done <- command(runCtx, as(srv, "aggregator", "run", "--lease-ttl", "300ms"), io.Discard, &runErr)
	}()

	_, pub := srv.ConnectAs(t, "publisher")
	require.Eventually(t, func() bool {
		_, err := pub.Stream(ctx, names.AttemptsStream)
		return err == nil
	}, 30*time.Second, 20*time.Millisecond, "the aggregator creates the stream; stderr:\n%s", runErr.String())
	w := ledgertest.Generate(rand.New(rand.NewPCG(3, 4)), ledgertest.Spec{Sessions: 2, Calls: 10, Prefix: "role-"})
	ledgertest.Publish(t, pub, w.Messages)
	_, err := pub.Publish(ctx, "ledger.attempts.sess-x.req-x", []byte("{not json")) // rejected: LEDGER_REJECTED
	require.NoError(t, err)

	for _, c := range []struct {
		role string
		args []string
		want string
	}{
		{"reader", []string{"wait", "--timeout", "30s"}, ""},
		{"reader", []string{"report"}, "2 sessions"},
		{"reader", []string{"report", "--by", "model,day"}, "model"},
		{"reader", []string{"report", "--by", "label:team,hour", "--since", "2000-01-01", "--until", "2000-01-02"}, ""},
		{"reader", []string{"verify"}, ""},
		{"operator", []string{"rebuild", "--lease-ttl", "300ms"}, ""},
		{"reader", []string{"verify"}, ""},
	} {
		code, stdout, stderr := runAs(t, ctx, as(srv, c.role, c.args...))
		require.Equal(t, 0, code, "%s as %s: stdout:\n%s\nstderr:\n%s\naggregator:\n%s", c.args[0], c.role, stdout, stderr, runErr.String())
		assert.Contains(t, stdout, c.want, c.args[0])
		assert.NotContains(t, stderr, "permission", c.args[0])
	}

	// After the rebuild's switch the aggregator's cache is gone: the next
	// batch reads its records from the buckets, many keys at once
	// ($JS.API.DIRECT.GET.<stream>, multi_last), which its role must grant.
	w2 := ledgertest.Generate(rand.New(rand.NewPCG(5, 6)), ledgertest.Spec{Sessions: 2, Calls: 10, Prefix: "role2-"})
	ledgertest.Publish(t, pub, w2.Messages)
	for _, args := range [][]string{{"wait", "--timeout", "30s"}, {"verify"}} {
		code, stdout, stderr := runAs(t, ctx, as(srv, "reader", args...))
		require.Equal(t, 0, code, "%s after the rebuild: stdout:\n%s\nstderr:\n%s\naggregator:\n%s", args[0], stdout, stderr, runErr.String())
	}
	stopRun()
	assert.Equal(t, 0, <-done, runErr.String())
	assert.NotContains(t, runErr.String(), "permission")
}

// A role that lacks one permission gets, within a second, an error that
// names the subject refused, not a timeout.
func TestAMissingPermissionIsNamedAtOnce(t *testing.T) {
	for _, c := range []struct {
		role, grant string
		args        []string
		want        string // the subject in the error
	}{
		{"aggregator", "$JS.API.STREAM.CREATE.LEDGER_ATTEMPTS", []string{"run"}, "$JS.API.STREAM.CREATE.LEDGER_ATTEMPTS"},
		{"reader", "$JS.API.STREAM.INFO.*", []string{"report"}, "$JS.API.STREAM.INFO."},
		{"reader", "$JS.API.DIRECT.GET.*", []string{"verify"}, "$JS.API.DIRECT.GET."},
		{"operator", "$JS.API.STREAM.CREATE.*", []string{"rebuild"}, "$JS.API.STREAM.CREATE."},
		{"operator", "$JS.API.STREAM.NAMES", []string{"rebuild"}, "$JS.API.STREAM.NAMES"},
		{"reader", "_INBOX_reader.>", []string{"report"}, "_INBOX_reader."},
	} {
		t.Run(c.role+" "+c.args[0]+" without "+c.grant, func(t *testing.T) {
			srv := natstest.StartRoles(t, natstest.WithoutGrant(c.role, c.grant))
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			if c.role != "aggregator" {
				// The ledger's streams and buckets exist, as the aggregator makes them.
				runCtx, stopRun := context.WithCancel(ctx)
				done := make(chan int, 1)
				go func() { done <- command(runCtx, as(srv, "aggregator", "run"), io.Discard, io.Discard) }()
				w := ledgertest.Generate(rand.New(rand.NewPCG(5, 6)), ledgertest.Spec{Sessions: 2, Calls: 4})
				_, pub := srv.ConnectAs(t, "publisher")
				ledgertest.Publish(t, pub, w.Messages)
				code, _, stderr := runAs(t, ctx, as(srv, "aggregator", "wait", "--timeout", "30s"))
				require.Equal(t, 0, code, stderr)
				stopRun()
				require.Equal(t, 0, <-done)
			}
			begin := time.Now()
			code, _, stderr := runAs(t, ctx, as(srv, c.role, c.args...))
			took := time.Since(begin)
			t.Logf("%s: exit %d after %s: %s", c.args[0], code, took, stderr)
			assert.Equal(t, 2, code)
			assert.Contains(t, stderr, "permission denied")
			assert.Contains(t, stderr, c.want)
			assert.Less(t, took, 3*time.Second, "reported at once, not after a timeout")
		})
	}
}
