package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/pricing"
	"github.com/agentledger/ledger/internal/projection"
)

var h0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func mustBy(t *testing.T, s string) []Dimension {
	t.Helper()
	ds, err := ParseBy(s)
	require.NoError(t, err)
	return ds
}

func TestParseBy(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []Dimension
		rule string // in the error, "" when valid
	}{
		{in: "model", want: []Dimension{{Kind: ByModel}}},
		{in: "label:team,day", want: []Dimension{{Kind: ByLabel, Key: "team"}, {Kind: ByDay}}},
		{in: "provider, hour", want: []Dimension{{Kind: ByProvider}, {Kind: ByHour}}},
		{in: "request,session", want: []Dimension{{Kind: ByRequest}, {Kind: BySession}}},
		{in: "team", rule: `--by "team": unknown dimension; want model, provider, label:KEY`},
		{in: "", rule: `--by: an empty dimension; want model`},
		{in: "model,,day", rule: `--by: an empty dimension`},
		{in: "label:Team", rule: `--by "label:Team": the label key must be a lower-case letter`},
		{in: "label:", rule: `--by "label:": the label key must be 1 to 32 bytes`},
		{in: "label:" + strings.Repeat("a", 33), rule: "key must be 1 to 32 bytes"},
		{in: "model,label:9x", rule: "key must be a lower-case letter"},
	} {
		got, err := ParseBy(tc.in)
		if tc.rule == "" {
			require.NoError(t, err, tc.in)
			require.Equal(t, tc.want, got, tc.in)
			continue
		}
		var qe *QueryError
		require.ErrorAs(t, err, &qe, tc.in)
		require.Equal(t, "--by", qe.Flag)
		require.Contains(t, err.Error(), tc.rule, tc.in)
	}
}

func TestParseTime(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Time
		rule string
	}{
		{in: "2026-12-04", want: time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)},
		{in: "2026-12-04T15:00:00Z", want: time.Date(2026, 12, 4, 15, 0, 0, 0, time.UTC)},
		{in: "2026-12-04T17:00:00+02:00", want: time.Date(2026, 12, 4, 15, 0, 0, 0, time.UTC)},
		{in: "2026-12-04T15:30:00Z", rule: "give a whole hour, such as 2026-12-04T15:00:00Z"},
		{in: "2026-12-04T15:00:00+05:30", rule: "the rollups are per UTC hour"},
		{in: "yesterday", rule: "want a date such as 2026-12-04"},
		{in: "2026-12-04 15:00", rule: "or an RFC 3339 time"},
	} {
		got, err := ParseTime("--since", tc.in)
		if tc.rule == "" {
			require.NoError(t, err, tc.in)
			require.Equal(t, tc.want, got, tc.in)
			require.Equal(t, time.UTC, got.Location())
			continue
		}
		require.ErrorContains(t, err, `--since "`+tc.in+`": `, tc.in)
		require.ErrorContains(t, err, tc.rule, tc.in)
	}
}

func TestQueryValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		q    Query
		src  Source
		rule string // "" when valid
	}{
		{name: "rollups", q: Query{By: mustBy(t, "label:team,day"), Since: h0, Until: h0.Add(time.Hour)}, src: FromRollups},
		{name: "sessions", q: Query{By: mustBy(t, "session"), Top: 10, Sort: SortOverhead}, src: FromSessions},
		{name: "session by time through the requests", q: Query{By: mustBy(t, "request,session,day"), Since: h0}, src: FromRequests},
		{name: "no dimension", q: Query{}, rule: "--by: name at least one dimension"},
		{name: "twice", q: Query{By: mustBy(t, "model,model")}, rule: `--by "model": named twice`},
		{name: "twice a label", q: Query{By: mustBy(t, "label:a,label:a")}, rule: `--by "label:a": named twice`},
		{name: "two labels", q: Query{By: mustBy(t, "label:a,label:b")}, src: FromRollups},
		{name: "hour and day", q: Query{By: mustBy(t, "hour,day")}, rule: "hour and day: give one of them"},
		{name: "session with day", q: Query{By: mustBy(t, "session,day")}, rule: "whole life, without hour, day, model, provider or labels: it combines with no other dimension; --by request,session,day scans every request record"},
		{name: "session with model", q: Query{By: mustBy(t, "model,session")}, rule: "--by request,model,session"},
		{name: "session since", q: Query{By: mustBy(t, "session"), Since: h0}, rule: "cannot take --since or --until; --by request,session"},
		{name: "session until", q: Query{By: mustBy(t, "session"), Until: h0}, rule: "cannot take --since or --until"},
		{name: "too many", q: Query{By: mustBy(t, "label:a,label:b,label:c,label:d,label:e,label:f,label:g,label:h,model")}, rule: "at most 8 dimensions, got 9"},
		{name: "negative top", q: Query{By: mustBy(t, "model"), Top: -1}, rule: `--top "-1": want 0`},
		{name: "bad sort", q: Query{By: mustBy(t, "model"), Sort: "price"}, rule: `--sort "price": want overhead, billed, cost or requests`},
		{name: "since after until", q: Query{By: mustBy(t, "model"), Since: h0.Add(time.Hour), Until: h0}, rule: "--since \"2026-12-01T01:00:00Z\": must be before --until 2026-12-01T00:00:00Z"},
		{name: "since equals until", q: Query{By: mustBy(t, "model"), Since: h0, Until: h0}, rule: "must be before --until"},
		{name: "since within an hour", q: Query{By: mustBy(t, "model"), Since: h0.Add(time.Minute)}, rule: "--since"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.q.Validate()
			if tc.rule == "" {
				require.NoError(t, err)
				require.Equal(t, tc.src, tc.q.Source())
				return
			}
			var qe *QueryError
			require.ErrorAs(t, err, &qe)
			require.ErrorContains(t, err, tc.rule)
		})
	}
}

// rollup is a cell of one request with in, out tokens billed attempts
// times and cost nano-USD per attempt (0: unpriced).
func rollup(hour int, model string, labels api.Labels, attempts int64, in, out int64, cost int64) projection.Rollup {
	u := events.Usage{InputTokens: in, OutputTokens: out}
	t := projection.Totals{Requests: 1, Succeeded: 1, Attempts: attempts, Usage: u,
		Billed: events.Usage{InputTokens: in * attempts, OutputTokens: out * attempts}}
	if cost == 0 {
		t.UnpricedBilledTokens = (in + out) * attempts
	} else {
		t.UsageCost, t.BilledCost = pricing.Money(cost), pricing.Money(cost*attempts)
	}
	return projection.Rollup{Cell: projection.Cell{Hour: h0.Add(time.Duration(hour) * time.Hour), Provider: providerOf(model), Model: model, Labels: labels}, Totals: t}
}

func TestGroupRollupsByHand(t *testing.T) {
	search, ads := api.Labels{"team": "search", "user": "u1"}, api.Labels{"team": "ads"}
	rs := []projection.Rollup{
		rollup(0, "gpt-4.1", search, 2, 100, 10, 1000),     // day 1
		rollup(1, "gpt-4.1", search, 1, 200, 20, 2000),     // day 1
		rollup(25, "gpt-4.1", ads, 3, 100, 10, 1000),       // day 2
		rollup(26, "claude-sonnet-4-5", nil, 1, 50, 5, 0),  // day 2, no labels, unpriced
		rollup(49, "claude-sonnet-4-5", ads, 4, 10, 1, 10), // day 3
	}
	type row struct {
		vals                     string
		requests, retries, over  int64
		billedCost, overheadCost int64
	}
	for _, tc := range []struct {
		name string
		q    Query
		want []row
	}{
		{name: "label:team,day", q: Query{By: mustBy(t, "label:team,day")}, want: []row{
			{"ads|2026-12-02", 1, 2, 220, 3000, 2000},
			{"ads|2026-12-03", 1, 3, 33, 40, 30},
			{"search|2026-12-01", 2, 1, 110, 4000, 1000},
			{"|2026-12-02", 1, 0, 0, 0, 0}, // (none) last
		}},
		{name: "model since until", q: Query{By: mustBy(t, "model"), Since: h0.Add(time.Hour), Until: h0.Add(49 * time.Hour)}, want: []row{
			{"claude-sonnet-4-5", 1, 0, 0, 0, 0},
			{"gpt-4.1", 2, 2, 220, 5000, 2000},
		}},
		{name: "hour top 2 by overhead", q: Query{By: mustBy(t, "hour"), Sort: SortOverhead, Top: 2}, want: []row{
			{"2026-12-02T01:00:00Z", 1, 2, 220, 3000, 2000},
			{"2026-12-01T00:00:00Z", 1, 1, 110, 2000, 1000},
		}},
		{name: "provider by cost", q: Query{By: mustBy(t, "provider"), Sort: SortCost}, want: []row{
			{"openai", 3, 3, 330, 7000, 3000},
			{"anthropic", 2, 3, 33, 40, 30},
		}},
		{name: "label:user by requests", q: Query{By: mustBy(t, "label:user"), Sort: SortRequests}, want: []row{
			{"", 3, 5, 253, 3040, 2030},
			{"u1", 2, 1, 110, 4000, 1000},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, tc.q.Validate())
			r := GroupRollups(rs, tc.q)
			got := make([]row, len(r.Rows))
			for i, x := range r.Rows {
				got[i] = row{strings.Join(x.Values, "|"), x.Requests, x.Retries, x.OverheadTokens, int64(x.BilledCost), int64(x.OverheadCost)}
			}
			require.Equal(t, tc.want, got)
		})
	}
	r := GroupRollups(rs, Query{By: mustBy(t, "day"), Top: 1, Sort: SortBilled})
	require.Equal(t, 3, r.Groups)
	require.Len(t, r.Rows, 1)
	require.Equal(t, "2026-12-01", r.Rows[0].Values[0], "day 1 billed 220+220 tokens, day 2 330+55")
	require.EqualValues(t, 5, r.Total.Requests, "the total covers the groups --top cut")
	require.EqualValues(t, 55, r.Total.UnpricedBilledTokens)
}

// Every row of a random query equals the sum of the cells an independent
// filter picks for its values, every cell in range lands in a row, and
// the rows are in the query's order; --top keeps the first rows.
func TestGroupRollupsMatchesAFilter(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	rs := genRollups(rng, fleet{requests: 3000, start: h0, hours: 72, models: []string{"gpt-4.1", "claude-sonnet-4-5", "gemini-2.5-flash"}, teams: 4, users: 11})
	dims := []string{"model", "provider", "label:team", "label:user", "hour", "day"}
	for i := range 60 {
		q := randomQuery(t, rng, dims, 72, false)
		all := GroupRollups(rs, q)

		var inRange projection.Totals
		for _, r := range rs {
			if (q.Since.IsZero() || !r.Hour.Before(q.Since)) && (q.Until.IsZero() || r.Hour.Before(q.Until)) {
				inRange = inRange.Add(r.Totals)
			}
		}
		require.Equal(t, measure(inRange), all.Total, "query %d %+v", i, q)
		require.Len(t, all.Rows, all.Groups)
		var rowsSum Measures
		for j, row := range all.Rows {
			var want projection.Totals
			for _, r := range rs {
				if matches(q, r, row.Values) {
					want = want.Add(r.Totals)
				}
			}
			require.Equal(t, measure(want), row.Measures, "query %d %v row %v", i, dimList(q.By), row.Values)
			rowsSum.Requests += row.Requests
			if j > 0 {
				c := compareMeasures(q.Sort, all.Rows[j-1].Measures, row.Measures)
				require.GreaterOrEqual(t, c, 0, "query %d: rows %d and %d out of order", i, j-1, j)
			}
		}
		require.Equal(t, inRange.Requests, rowsSum.Requests)

		q.Top = 1 + rng.IntN(5)
		top := GroupRollups(rs, q)
		require.Equal(t, all.Rows[:min(q.Top, len(all.Rows))], top.Rows)
		require.Equal(t, all.Total, top.Total)
	}
}

// matches reports whether rollup r is in q's range and its cell spells
// values.
func matches(q Query, r projection.Rollup, values []string) bool {
	if !q.Since.IsZero() && r.Hour.Before(q.Since) || !q.Until.IsZero() && !r.Hour.Before(q.Until) {
		return false
	}
	for i, d := range q.By {
		var v string
		switch d.Kind {
		case ByModel:
			v = r.Model
		case ByProvider:
			v = r.Provider
		case ByLabel:
			v = r.Labels[d.Key]
		case ByHour:
			v = r.Hour.Format("2006-01-02T15:04:05Z")
		case ByDay:
			v = r.Hour.Format("2006-01-02")
		}
		if v != values[i] {
			return false
		}
	}
	return true
}

func TestGroupSessions(t *testing.T) {
	ss := []projection.SessionView{
		{SessionID: "a", Totals: projection.Totals{Requests: 1, Attempts: 1, Usage: events.Usage{InputTokens: 10}, Billed: events.Usage{InputTokens: 10}}},
		{SessionID: "b", Totals: projection.Totals{Requests: 2, Attempts: 5, Usage: events.Usage{InputTokens: 10}, Billed: events.Usage{InputTokens: 40}}},
		{SessionID: "c", Totals: projection.Totals{Requests: 3, Attempts: 4, Usage: events.Usage{InputTokens: 10}, Billed: events.Usage{InputTokens: 20}}},
	}
	r := GroupSessions(ss, Query{By: mustBy(t, "session"), Sort: SortOverhead, Top: 2})
	require.Equal(t, FromSessions, r.Source)
	require.Equal(t, 3, r.Groups)
	require.Len(t, r.Rows, 2)
	require.Equal(t, []string{"b"}, r.Rows[0].Values)
	require.EqualValues(t, 30, r.Rows[0].OverheadTokens)
	require.EqualValues(t, 3, r.Rows[0].Retries)
	require.Equal(t, []string{"c"}, r.Rows[1].Values)
	require.EqualValues(t, 6, r.Total.Requests)
}

func TestGroupRequests(t *testing.T) {
	req := func(id, session, model string, start time.Time, attempts int, in int64) projection.Request {
		var r projection.Request
		r.RequestID, r.SessionID, r.Provider, r.Model, r.FirstStartedAt = id, session, providerOf(model), model, start
		r.Status, r.Attempts, r.Usage, r.Billed = projection.StatusSucceeded, attempts, events.Usage{InputTokens: in}, events.Usage{InputTokens: in * int64(attempts)}
		r.Log = make([]projection.Entry, attempts)
		return r
	}
	// celled gives r the cell of its first accepted event: another hour
	// and model than the winning attempt's (a fallback), and labels.
	celled := func(r projection.Request, hour time.Time, model string, labels api.Labels, conflicts int64) projection.Request {
		r.Cell = &projection.RecordCell{Hour: hour, Provider: providerOf(model), Model: model}
		r.Labels, r.LabelConflicts = labels, conflicts
		return r
	}
	rs := []projection.Request{
		celled(req("r1", "s1", "gpt-4.1", h0.Add(10*time.Minute), 1, 100), h0, "gpt-4.1", api.Labels{"team": "ads"}, 0),
		celled(req("r2", "s1", "gpt-4.1-mini", h0.Add(26*time.Hour+5*time.Minute), 3, 100), h0.Add(25*time.Hour), "gpt-4.1", api.Labels{"team": "ads"}, 2),
		req("r3", "s2", "claude-sonnet-4-5", h0.Add(26*time.Hour), 2, 50), // written before the rollups: no cell
		{}, // a record without an accepted event counts nowhere
	}
	r := GroupRequests(rs, Query{By: mustBy(t, "request,session,model,label:team,hour"), Since: h0.Add(24 * time.Hour)})
	require.Equal(t, FromRequests, r.Source)
	require.Len(t, r.Rows, 2)
	require.Equal(t, []string{"r2", "s1", "gpt-4.1", "ads", "2026-12-02T01:00:00Z"}, r.Rows[0].Values, "the cell's hour, model and labels")
	require.EqualValues(t, 200, r.Rows[0].OverheadTokens)
	require.EqualValues(t, 2, r.Rows[0].LabelConflicts)
	require.Equal(t, []string{"r3", "s2", "claude-sonnet-4-5", "", "2026-12-02T02:00:00Z"}, r.Rows[1].Values, "no cell: the hour it started, its model, no labels")

	r = GroupRequests(rs, Query{By: mustBy(t, "label:team")})
	require.Len(t, r.Rows, 2)
	require.EqualValues(t, 2, r.Rows[0].Requests)
	require.EqualValues(t, 2, r.Total.LabelConflicts)
}

func TestWriteRows(t *testing.T) {
	rs := []projection.Rollup{
		rollup(0, "gpt-4.1", api.Labels{"team": "search"}, 2, 100, 10, 1_500_000_001),
		rollup(1, "claude-sonnet-4-5", nil, 1, 50, 5, 0),
	}
	rs[0].LabelConflicts = 3
	q := Query{By: mustBy(t, "label:team,day"), Sort: SortCost, Since: h0}
	r := GroupRollups(rs, q)
	r.Applied, r.StreamLast = 7, 9

	var b bytes.Buffer
	require.NoError(t, WriteCSV(&b, r))
	recs, err := csv.NewReader(&b).ReadAll()
	require.NoError(t, err)
	require.Equal(t, append([]string{"label:team", "day"}, Columns...), recs[0])
	require.Equal(t, []string{"label:team", "day", "requests", "attempts", "retries", "usage_tokens", "billed_tokens", "overhead_tokens",
		"usage_cost_nano_usd", "usage_cost_usd", "billed_cost_nano_usd", "billed_cost_usd", "overhead_cost_nano_usd", "overhead_cost_usd",
		"unpriced_billed_tokens", "label_conflicts", "saturated"}, recs[0], "the column names are stable")
	require.Equal(t, []string{"search", "2026-12-01", "1", "2", "1", "110", "220", "110",
		"1500000001", "1.500000001", "3000000002", "3.000000002", "1500000001", "1.500000001", "0", "3", "false"}, recs[1])
	require.Equal(t, "", recs[2][0], "no such label: an empty field (a label value is never empty)")
	require.Len(t, recs, 3, "no total line")

	b.Reset()
	require.NoError(t, WriteRowsJSON(&b, r))
	var doc struct {
		By     []string         `json:"by"`
		Source string           `json:"source"`
		Since  string           `json:"since"`
		Sort   string           `json:"sort"`
		Groups int              `json:"groups"`
		Rows   []map[string]any `json:"rows"`
		Total  map[string]any   `json:"total"`
		Seq    uint64           `json:"applied_seq"`
	}
	dec := json.NewDecoder(&b)
	dec.UseNumber()
	require.NoError(t, dec.Decode(&doc), b.String())
	require.Equal(t, []string{"label:team", "day"}, doc.By)
	require.Equal(t, "rollups", doc.Source)
	require.Equal(t, "2026-12-01T00:00:00Z", doc.Since)
	require.Equal(t, "cost", doc.Sort)
	require.Len(t, doc.Rows, 2)
	require.Equal(t, json.Number("3000000002"), doc.Rows[0]["billed_cost_nano_usd"], "money as an integer")
	require.Equal(t, "3.000000002", doc.Rows[0]["billed_cost_usd"], "and as a decimal string")
	require.Nil(t, doc.Rows[1]["label:team"], "no such label: null")
	require.Contains(t, doc.Rows[1], "label:team")
	require.Equal(t, json.Number("2"), doc.Total["requests"])
	require.Equal(t, uint64(7), doc.Seq)

	b.Reset()
	require.NoError(t, WriteRowsTable(&b, r))
	out := b.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Equal(t, []string{"LABEL:TEAM", "DAY", "REQUESTS"}, strings.Fields(lines[0])[:3])
	require.Equal(t, []string{"search", "2026-12-01", "1", "2", "1", "110", "220", "110", "100.0%", "1.500000001", "3.000000002", "1.500000001", "0", "3"}, strings.Fields(lines[1]))
	require.Equal(t, "(none)", strings.Fields(lines[2])[0])
	require.Equal(t, "TOTAL", strings.Fields(lines[3])[0])
	require.Contains(t, out, "2 groups, by cost, most first, from the rollups (2 records, one per hour, provider, model and labels), hours from 2026-12-01T00:00:00Z; applied through stream sequence 7 of 9 (2 events not applied yet).")
	require.Contains(t, out, "(none): requests without that label.")
	require.Contains(t, out, "55 billed tokens had no price")
	require.Contains(t, out, "3 accepted events carried labels other than their request's first: counted in their request's cell, their labels ignored.")
}

// An empty answer from a ledger that has applied events says why it may
// be empty.
func TestWriteRowsEmpty(t *testing.T) {
	r := GroupRollups(nil, Query{By: mustBy(t, "model")})
	r.Applied, r.StreamLast = 5, 5
	var b bytes.Buffer
	require.NoError(t, WriteRowsTable(&b, r))
	require.Contains(t, b.String(), "0 groups, by model, from the rollups")
	require.Contains(t, b.String(), "has none until `aggregator rebuild`")
}

func TestWriteRowsSaturated(t *testing.T) {
	tot := projection.Totals{Requests: 1, Attempts: 2, Billed: events.Usage{InputTokens: projection.Ceiling, OutputTokens: 5}, Saturated: true}
	r := GroupRollups([]projection.Rollup{{Cell: projection.Cell{Hour: h0, Model: "m", Provider: "p"}, Totals: tot}}, Query{By: mustBy(t, "model")})
	var b bytes.Buffer
	require.NoError(t, WriteCSV(&b, r))
	recs, err := csv.NewReader(&b).ReadAll()
	require.NoError(t, err)
	row := map[string]string{}
	for i, h := range recs[0] {
		row[h] = recs[1][i]
	}
	require.Equal(t, "true", row["saturated"])
	require.Equal(t, "", row["billed_tokens"], "a sum past 2^63-1 is unknown, never wrapped")
	require.Equal(t, "", row["retries"])
	require.Equal(t, "1", row["requests"])
	b.Reset()
	require.NoError(t, WriteRowsTable(&b, r))
	require.Contains(t, b.String(), "n/a")
	require.Contains(t, b.String(), "passed 9,223,372,036,854,775,807 (2^63-1)")
}
