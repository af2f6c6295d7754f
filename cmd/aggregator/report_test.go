package main

import (
	"encoding/csv"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/cli"
	"github.com/agentledger/ledger/internal/ledgertest"
	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/topology"
)

// Bad report flags are refused before any connection, with the flag and
// the rule.
func TestReportByRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--by", "team"}, `--by "team": unknown dimension; want model, provider, label:KEY, session, hour, day or request`},
		{[]string{"--by", "label:Team,day"}, `--by "label:Team": the label key must be a lower-case letter followed by lower-case letters, digits and '_'`},
		{[]string{"--by", "model", "--since", "2026-12-05", "--until", "2026-12-04"}, `--since "2026-12-05T00:00:00Z": must be before --until 2026-12-04T00:00:00Z`},
		{[]string{"--by", "model", "--since", "2026-12-04T10:30:00Z"}, `--since "2026-12-04T10:30:00Z": the rollups are per UTC hour`},
		{[]string{"--by", "model", "--until", "monday"}, `--until "monday": want a date such as 2026-12-04`},
		{[]string{"--by", "session,day"}, "--by: session reads the session records, each a total over the session's whole life, without hour, day, model, provider or labels: it combines with no other dimension; --by request,session,day scans every request record and can"},
		{[]string{"--by", "session", "--since", "2026-12-04"}, "cannot take --since or --until; --by request,session with them scans every request record"},
		{[]string{"--by", "hour,day"}, "--by: hour and day: give one of them"},
		{[]string{"--by", "model", "--top", "-3"}, `--top "-3": want 0 (every row) or more`},
		{[]string{"--by", "model", "--sort", "price"}, `--sort "price": want overhead, billed, cost or requests`},
		{[]string{"--by", "model", "--json", "--csv"}, "--json and --csv: give one of them"},
		{[]string{"--by", "model", "--session", "s1"}, "--by: not with --session, --at or --at-seq"},
		{[]string{"--csv"}, "--csv: only with --by"},
		{[]string{"--top", "5"}, "--top: only with --by"},
		{[]string{"--since", "2026-12-04"}, "--since: only with --by"},
	} {
		code, _, stderr := run(t, append([]string{"report", "--nats-url", "nats://127.0.0.1:1"}, tc.args...)...)
		require.Equal(t, cli.ExitUsage, code, "%v: %s", tc.args, stderr)
		require.Contains(t, stderr, tc.want, "%v", tc.args)
	}
}

// --by session reads the session records: one row per session, --top and
// --sort apply; the default report is unchanged beside it.
func TestReportBySession(t *testing.T) {
	srv, _, js := natstest.StartJS(t)
	_, err := topology.EnsureAttempts(t.Context(), js, topology.Config{})
	require.NoError(t, err)
	w := ledgertest.Generate(rand.New(rand.NewPCG(3, 4)), ledgertest.Spec{Sessions: 5, Calls: 6})
	ledgertest.Publish(t, js, w.Messages)
	stop := aggregator(t, js, nil)
	ledgertest.WaitCaughtUp(t, js)
	stop()

	code, out, stderr := run(t, "report", "--nats-url", srv.URL(), "--by", "session", "--sort", "requests", "--top", "3", "--csv")
	require.Equal(t, cli.ExitOK, code, stderr)
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	require.NoError(t, err)
	require.Len(t, recs, 4, out)
	require.Equal(t, []string{"session", "requests"}, recs[0][:2])
	for _, rec := range recs[1:] {
		s, ok := w.Sessions[rec[0]]
		require.True(t, ok, rec[0])
		require.Equal(t, strconvU(uint64(s.Requests)), rec[1], rec[0])
	}

	code, out, stderr = run(t, "report", "--nats-url", srv.URL(), "--by", "session")
	require.Equal(t, cli.ExitOK, code, stderr)
	n := strconv.Itoa(len(w.Sessions))
	require.Contains(t, out, n+" groups, by session, from the session records (each session's whole life)")
	code, out, stderr = run(t, "report", "--nats-url", srv.URL())
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Contains(t, out, n+" sessions; applied through stream sequence", "the default report")
}
