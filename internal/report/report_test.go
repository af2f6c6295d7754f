package report

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/projection"
	"github.com/agentledger/ledger/internal/topology"
)

func TestNum(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 7: "7", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1500: "-1,500"} {
		require.Equal(t, want, num(n), "num(%d)", n)
	}
}

func TestWriteTableShowsOverhead(t *testing.T) {
	s := projection.SessionView{SessionID: "S1", Totals: projection.Totals{
		Requests: 1, Succeeded: 1, Attempts: 2,
		Usage:     events.Usage{InputTokens: 500, OutputTokens: 1200},
		Billed:    events.Usage{InputTokens: 1000, OutputTokens: 1200},
		UsageCost: 19_500_000, BilledCost: 21_000_000, UnpricedBilledTokens: 40,
	}}
	l := &Ledger{Sessions: []projection.SessionView{s}, Total: s.Totals, Applied: 2, StreamLast: 3}
	var buf bytes.Buffer
	require.NoError(t, WriteTable(&buf, l))
	out := buf.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4, out) // header, the session, the summary (no total row for one session), the unpriced note
	require.Equal(t, []string{"S1", "1", "2", "1", "1", "0", "0", "500", "1,200", "1,000", "1,200", "500", "0", "29.4%",
		"0.0195", "0.021", "0.0015", "40"}, strings.Fields(lines[1]))
	require.Contains(t, lines[3], "40 billed tokens (input and output) had no price in the ledger's catalog for their provider, model and service tier")
	require.Contains(t, lines[2], "applied through stream sequence 2 of 3 (1 events not applied yet)")

	buf.Reset()
	require.NoError(t, WriteJSON(&buf, l))
	var back Ledger
	require.NoError(t, json.Unmarshal(buf.Bytes(), &back))
	require.Equal(t, *l, back)
}

func TestLoadReadsTheSessionsBucket(t *testing.T) {
	ctx := context.Background()
	_, _, js := natstest.StartJS(t)
	l, err := Load(ctx, js, "")
	require.NoError(t, err, "an empty ledger is not an error")
	require.Empty(t, l.Sessions)

	kv, err := topology.EnsureBucket(ctx, js, topology.Config{}, names.SessionsBucket, "")
	require.NoError(t, err)
	for _, s := range []projection.Session{
		{SessionView: projection.SessionView{SessionID: "b", Totals: projection.Totals{Requests: 2, Attempts: 3}}},
		{SessionView: projection.SessionView{SessionID: "a", Totals: projection.Totals{Requests: 1, Attempts: 1}}},
	} {
		data, err := json.Marshal(s)
		require.NoError(t, err)
		_, err = kv.Put(ctx, s.SessionID, data)
		require.NoError(t, err)
	}
	l, err = Load(ctx, js, "")
	require.NoError(t, err)
	require.Len(t, l.Sessions, 2)
	require.Equal(t, "a", l.Sessions[0].SessionID, "sorted by session")
	require.EqualValues(t, 3, l.Total.Requests)
	require.EqualValues(t, 4, l.Total.Attempts)

	one, err := Load(ctx, js, "b")
	require.NoError(t, err)
	require.Len(t, one.Sessions, 1)
	_, err = Load(ctx, js, "zz")
	require.ErrorIs(t, err, ErrNoSession)
	_, err = Load(ctx, js, "a.b")
	var fe *events.FieldError
	require.ErrorAs(t, err, &fe)
}

// TestWriteTableMarksSaturatedSums: sums that passed 2^63-1 never wrap in
// the table or the JSON: a saturated session shows "≥" and the ceiling, a
// total over sessions that passes it saturates too, and what depends on a
// saturated sum is n/a.
func TestWriteTableMarksSaturatedSums(t *testing.T) {
	const big = 5_000_000_000_000_000_000 // two of them pass 2^63-1
	sessions := []projection.Session{
		{SessionView: projection.SessionView{SessionID: "a", Totals: projection.Totals{
			Requests: 2, Succeeded: 2, Attempts: 3,
			Usage:  events.Usage{InputTokens: big, OutputTokens: big},
			Billed: events.Usage{InputTokens: big, OutputTokens: big},
		}}},
		{SessionView: projection.SessionView{SessionID: "b", Totals: projection.Totals{
			Requests: 1, Succeeded: 1, Attempts: 1,
			Usage:     events.Usage{InputTokens: 10, OutputTokens: 1},
			Billed:    events.Usage{InputTokens: projection.Ceiling, OutputTokens: 1},
			Saturated: true,
		}}},
		{SessionView: projection.SessionView{SessionID: "c", Totals: projection.Totals{
			Requests: 1, Failed: 1, Attempts: 1,
			Billed: events.Usage{InputTokens: big, OutputTokens: 2},
		}}},
	}
	l := &Ledger{Applied: 9, StreamLast: 9}
	for _, s := range sessions {
		data, err := json.Marshal(&s)
		require.NoError(t, err)
		require.NoError(t, l.add(data))
	}
	require.True(t, l.Total.Saturated)
	require.Equal(t, int64(projection.Ceiling), l.Total.Billed.InputTokens)
	require.Equal(t, int64(4), l.Total.Requests, "the counts stay exact")

	var buf bytes.Buffer
	require.NoError(t, WriteTable(&buf, l))
	out := buf.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 7, out) // header, three sessions, total, summary, saturation note
	ceiling := "≥9,223,372,036,854,775,807"
	require.Equal(t, []string{"a", "2", "3", "1", "2", "0", "0", "5,000,000,000,000,000,000", "5,000,000,000,000,000,000",
		"5,000,000,000,000,000,000", "5,000,000,000,000,000,000", "0", "0", "0.0%", "0.00", "0.00", "0.00", "0"}, strings.Fields(lines[1]), "exact sums near the ceiling")
	require.Equal(t, []string{"b", "1", "1", "0", "1", "0", "0", "10", "1", ceiling, "1", "n/a", "n/a", "n/a", "0.00", "0.00", "0.00", "0"}, strings.Fields(lines[2]))
	require.Equal(t, []string{"TOTAL", "4", "5", "1", "3", "1", "0", "5,000,000,000,000,000,010", "5,000,000,000,000,000,001",
		ceiling, "5,000,000,000,000,000,003", "n/a", "n/a", "n/a", "0.00", "0.00", "0.00", "0"}, strings.Fields(lines[4]))
	require.Contains(t, lines[6], "1 session saturated")
	require.Contains(t, lines[6], "9,223,372,036,854,775,807 (2^63-1)")
	for _, f := range strings.Fields(strings.Join(lines[:5], "\n")) {
		require.False(t, strings.HasPrefix(f, "-"), "%s: nothing wraps around to a negative number", f)
	}

	buf.Reset()
	require.NoError(t, WriteJSON(&buf, l))
	var back struct {
		Sessions []map[string]any `json:"sessions"`
		Total    map[string]any   `json:"total"`
	}
	require.NoError(t, json.Unmarshal(buf.Bytes(), &back))
	require.Equal(t, true, back.Total["saturated"])
	require.Equal(t, true, back.Sessions[1]["saturated"])
	require.NotContains(t, back.Sessions[0], "saturated")
}

// The input estimated for streams cut before their usage is shown apart,
// on a line of its own, and in the JSON; the table's usage and billed do
// not include it. A ledger without estimates has no such line.
func TestWriteTableShowsEstimatedInputApart(t *testing.T) {
	exact := projection.SessionView{SessionID: "S1", Totals: projection.Totals{
		Requests: 1, Succeeded: 1, Attempts: 1, Usage: events.Usage{InputTokens: 500, OutputTokens: 20}, Billed: events.Usage{InputTokens: 500, OutputTokens: 20}}}
	cut := projection.SessionView{SessionID: "S2", Totals: projection.Totals{
		Requests: 1, Failed: 1, Attempts: 1, Billed: events.Usage{OutputTokens: 3}, EstimatedInputTokens: 1812}}
	for _, tc := range []struct {
		name     string
		sessions []projection.SessionView
		line     string
	}{
		{"an estimate", []projection.SessionView{exact, cut}, "Estimated input, not in usage or billed: 1,812 tokens in 1 session "},
		{"none", []projection.SessionView{exact}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &Ledger{Applied: 2, StreamLast: 2}
			for _, s := range tc.sessions {
				l.Sessions = append(l.Sessions, s)
				l.Total = l.Total.Add(s.Totals)
			}
			var buf bytes.Buffer
			require.NoError(t, WriteTable(&buf, l))
			out := buf.String()
			if tc.line == "" {
				require.NotContains(t, out, "Estimated", out)
			} else {
				require.Contains(t, out, tc.line, out)
			}
			for _, line := range strings.Split(out, "\n") {
				if f := strings.Fields(line); len(f) > 8 && f[0] == "TOTAL" {
					require.Equal(t, []string{"500", "20", "500", "23"}, f[7:11], "usage and billed without the estimate")
				}
			}
			buf.Reset()
			require.NoError(t, WriteJSON(&buf, l))
			require.Equal(t, tc.line != "", strings.Contains(buf.String(), `"estimated_input_tokens": 1812`), buf.String())
		})
	}
}

// The money columns, the estimated-input line and the unpriced note appear
// together (the estimate and cost branches each knew only their own).
func TestWriteTableShowsMoneyAndEstimate(t *testing.T) {
	s := projection.SessionView{SessionID: "S1", Totals: projection.Totals{
		Requests: 1, Succeeded: 1, Attempts: 2,
		Usage:                events.Usage{InputTokens: 500, OutputTokens: 1200},
		Billed:               events.Usage{InputTokens: 500, OutputTokens: 1203},
		EstimatedInputTokens: 812,
		UsageCost:            19_500_000, BilledCost: 21_000_000, UnpricedBilledTokens: 40,
	}}
	l := &Ledger{Sessions: []projection.SessionView{s}, Total: s.Totals, Applied: 2, StreamLast: 2}
	var buf bytes.Buffer
	require.NoError(t, WriteTable(&buf, l))
	out := buf.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 5, out) // header, the session, the summary, the estimate, the unpriced note
	require.Equal(t, []string{"0.0195", "0.021", "0.0015", "40"}, strings.Fields(lines[1])[14:], out)
	require.Contains(t, lines[3], "Estimated input, not in usage or billed: 812 tokens", out)
	require.Contains(t, lines[4], "40 billed tokens (input and output) had no price in the ledger's catalog for their provider, model and service tier", out)

	buf.Reset()
	require.NoError(t, WriteJSON(&buf, l))
	for _, member := range []string{`"estimated_input_tokens": 812`, `"usage_cost": 19500000`, `"billed_cost": 21000000`, `"unpriced_billed_tokens": 40`} {
		require.Contains(t, buf.String(), member)
	}
}
