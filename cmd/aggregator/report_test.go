package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/cli"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/ledgertest"
	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/projection"
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

// report --by answers from the rollups the aggregator wrote: the requests
// of a labelled workload spread over 50 hours and two models land in the
// rows of their team and day, model and hour, as an independent count of
// the workload says; --by request scans every request record.
func TestReportByAnswersFromTheRollups(t *testing.T) {
	srv, _, js := natstest.StartJS(t)
	_, err := topology.EnsureAttempts(t.Context(), js, topology.Config{})
	require.NoError(t, err)
	w := ledgertest.Generate(rand.New(rand.NewPCG(5, 6)), ledgertest.Spec{Sessions: 7, Calls: 120})
	index := func(rid string) int { n, _ := strconv.Atoi(strings.TrimPrefix(rid, "req-")); return n }
	team := func(sid string) string { return []string{"search", "ads", "support"}[int(sid[len(sid)-1]-'0')%3] }
	hour := func(rid string) time.Time { return ledgertest.T0.Add(time.Duration(index(rid)%50) * time.Hour) }
	model := func(rid string) string { return []string{"claude-test", "claude-other"}[index(rid)%2] }
	seen := map[*events.Attempt]bool{}
	for _, m := range w.Messages {
		if ev := m.Event; !seen[ev] {
			seen[ev] = true
			ev.Labels = api.Labels{"team": team(ev.SessionID)}
			ev.Model = model(ev.RequestID)
			ev.StartedAt = hour(ev.RequestID).Add(time.Duration(ev.Attempt) * time.Minute)
			ev.FinishedAt = ev.StartedAt.Add(time.Second)
		}
	}
	ledgertest.Publish(t, js, w.Messages)
	stop := aggregator(t, js, nil)
	ledgertest.WaitCaughtUp(t, js)
	stop()

	// want counts the workload's requests and billed tokens by a key.
	type sums struct{ Requests, BilledTokens int64 }
	want := func(key func(rid, sid string) string, in func(rid string) bool) map[string]sums {
		m := map[string]sums{}
		for rid, v := range w.Requests {
			if in(rid) {
				s := m[key(rid, v.SessionID)]
				s.Requests++
				s.BilledTokens += v.Billed.InputTokens + v.Billed.OutputTokens
				m[key(rid, v.SessionID)] = s
			}
		}
		return m
	}
	all := func(string) bool { return true }
	since := ledgertest.T0.Add(20 * time.Hour)
	// The grain that answers: the hours unless every grain of the ledger is
	// whole (then the planner's, report.Query.Grain); none for the request
	// records.
	allGrains, err := projection.LedgerRollupGrains(t.Context(), js)
	require.NoError(t, err)
	grain := func(coarsest string) string {
		if allGrains {
			return coarsest
		}
		return "hour"
	}
	for _, tc := range []struct {
		args  []string
		want  map[string]sums
		grain string
	}{
		{[]string{"--by", "label:team,day"}, want(func(rid, sid string) string { return team(sid) + "|" + hour(rid).Format(time.DateOnly) }, all), grain("day")},
		{[]string{"--by", "model,hour", "--since", since.Format(time.RFC3339)}, want(func(rid, _ string) string { return model(rid) + "|" + hour(rid).Format(time.RFC3339) },
			func(rid string) bool { return !hour(rid).Before(since) }), grain("model_hour")},
		{[]string{"--by", "label:team,hour", "--since", since.Format(time.RFC3339)}, want(func(rid, sid string) string { return team(sid) + "|" + hour(rid).Format(time.RFC3339) },
			func(rid string) bool { return !hour(rid).Before(since) }), "hour"},
		{[]string{"--by", "provider"}, want(func(string, string) string { return "anthropic" }, all), grain("model_hour")},
		{[]string{"--by", "request,label:team"}, want(func(rid, sid string) string { return rid + "|" + team(sid) }, all), ""},
	} {
		code, out, stderr := run(t, append([]string{"report", "--nats-url", srv.URL(), "--json"}, tc.args...)...)
		require.Equal(t, cli.ExitOK, code, "%v: %s", tc.args, stderr)
		var doc struct {
			By    []string         `json:"by"`
			Grain string           `json:"grain"`
			Rows  []map[string]any `json:"rows"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &doc))
		require.Equal(t, tc.grain, doc.Grain, "%v: the grain that answered", tc.args)
		got := map[string]sums{}
		for _, row := range doc.Rows {
			var vals []string
			for _, d := range doc.By {
				vals = append(vals, fmt.Sprint(row[d]))
			}
			got[strings.Join(vals, "|")] = sums{int64(row["requests"].(float64)), int64(row["billed_tokens"].(float64))}
		}
		require.Equal(t, tc.want, got, "%v", tc.args)
	}

	code, out, stderr := run(t, "report", "--nats-url", srv.URL(), "--by", "label:team", "--sort", "requests", "--top", "1")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Contains(t, out, "1 of 3 groups, by requests, most first, from the rollups")
}
