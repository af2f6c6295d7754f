package report

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
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
		Usage:  events.Usage{InputTokens: 500, OutputTokens: 1200},
		Billed: events.Usage{InputTokens: 1000, OutputTokens: 1200},
	}}
	l := &Ledger{Sessions: []projection.SessionView{s}, Total: s.Totals, Applied: 2, StreamLast: 3}
	var buf bytes.Buffer
	require.NoError(t, WriteTable(&buf, l))
	out := buf.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out) // header, the session, the summary (no total row for one session)
	require.Equal(t, []string{"S1", "1", "2", "1", "1", "0", "0", "500", "1,200", "1,000", "1,200", "500", "0", "29.4%"}, strings.Fields(lines[1]))
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

	kv, err := topology.EnsureBucket(ctx, js, topology.Config{}, events.SessionsBucket, "")
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
