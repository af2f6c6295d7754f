package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger"
	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/gateway"
	"github.com/agentledger/ledger/internal/cli"
	"github.com/agentledger/ledger/internal/projection"
	"github.com/agentledger/ledger/ledgertest"
)

// Issue 20, end to end: labels set by the three producers (the Go API,
// the gateway's header, publisher ingest) reach the rollups, each request
// in the cell of its provider, model, hour and merged labels.
func TestLabelsOfEveryProducerReachTheRollups(t *testing.T) {
	l := ledgertest.Start(t)
	ctx := t.Context()

	// The Go API: the middleware's defaults under the call's labels.
	mw, err := ledger.NewMiddleware(l.Publisher(t), ledger.WithLabels(ledger.Labels{"team": "go", "env": "prod"}),
		ledger.WithClassifiers(ledger.ClassifierFor("anthropic", ledger.ClassifierFunc(func(error, time.Time) (ledger.Classification, bool) {
			return ledger.Classification{}, false
		}))))
	require.NoError(t, err)
	call := ledger.Call{SessionID: "sess-go", RequestID: "req-go", Provider: "anthropic", Model: "claude-x", Labels: ledger.Labels{"user": "u-1"}}
	_, err = ledger.Do(ctx, mw, call, func(context.Context, ledger.Attempt) (int, ledger.Report, error) {
		return 0, ledger.Report{Usage: ledger.Usage{InputTokens: 100, OutputTokens: 10}}, nil
	})
	require.NoError(t, err)

	// The gateway: X-Ledger-Labels over its WithLabels.
	up := ledgertest.FakeOpenAI(t, ledgertest.Succeed(ledger.Usage{InputTokens: 30, OutputTokens: 4}))
	gw := ledgertest.StartGateway(t, l, ledgertest.GatewayUpstream(up), gateway.WithLabels(ledger.Labels{"env": "gw"}))
	req, err := http.NewRequest(http.MethodPost, gw.URL()+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}`))
	require.NoError(t, err)
	for k, v := range map[string]string{"Content-Type": "application/json", "Authorization": "Bearer test",
		"X-Ledger-Session-Id": "sess-gw", "X-Ledger-Request-Id": "req-gw", "X-Ledger-Labels": "team=search, user=u-42"} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	// Ingest: the line's labels over --labels.
	ev, line := validEvent(t, "sess-in", "req-in", 0)
	line = strings.TrimSuffix(line, "}") + `,"labels":{"team":"ingest"}}`
	path := filepath.Join(t.TempDir(), "events.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(line+"\n"), 0o644))
	code, stdout, stderr := runCmd(t, ctx, "", "ingest", "--nats-url", l.URL(), "--labels", "source=import", path)
	require.Equal(t, cli.ExitOK, code, "%s%s", stdout, stderr)

	for _, id := range []string{"req-go", "req-gw", "req-in"} {
		l.WaitRequest(t, id)
	}
	l.WaitCaughtUp(t)
	rollups, err := projection.ReadRollups(ctx, l.Connect(t).JetStream(), projection.LiveNames(), projection.RollupFilter{})
	require.NoError(t, err)
	type cell struct {
		provider, model string
		labels          string
	}
	got := map[cell]projection.Rollup{}
	for _, r := range rollups {
		got[cell{r.Provider, r.Model, api.FormatLabels(r.Labels)}] = r
	}
	for _, w := range []struct {
		cell
		hour  time.Time // zero: this test's hour
		usage ledger.Usage
	}{
		{cell: cell{"anthropic", "claude-x", "env=prod,team=go,user=u-1"}, usage: ledger.Usage{InputTokens: 100, OutputTokens: 10}},
		{cell: cell{"openai", "gpt-4.1-mini", "env=gw,team=search,user=u-42"}, usage: ledger.Usage{InputTokens: 30, OutputTokens: 4}},
		{cell: cell{"anthropic", "claude-x", "source=import,team=ingest"}, hour: ev.StartedAt.Truncate(time.Hour), usage: ev.Usage},
	} {
		r, ok := got[w.cell]
		require.True(t, ok, "no rollup for %+v; the rollups: %+v", w.cell, rollups)
		assert.Equal(t, int64(1), r.Requests, "%+v", w.cell)
		assert.Equal(t, w.usage, r.Usage, "%+v", w.cell)
		if !w.hour.IsZero() {
			assert.True(t, w.hour.Equal(r.Hour), "the ingested event's own hour: %s, got %s", w.hour, r.Hour)
		}
	}
	assert.Len(t, rollups, 3, "one cell each")
}
