package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/cli"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/natstest"
)

// Issue 20: ingest reads each line's labels through the events codec, adds
// --labels under them, publishes the valid lines with their labels, and
// reports each bad one with its line, the label and the rule.
func TestIngestLabels(t *testing.T) {
	srv, _, js := natstest.StartJS(t)
	withLabels := func(req, labels string) string {
		_, line := validEvent(t, "sess", req, 0)
		if labels == "" {
			return line
		}
		return strings.TrimSuffix(line, "}") + `,"labels":` + labels + "}"
	}
	fifteen := make([]string, 15)
	for i := range fifteen {
		fifteen[i] = fmt.Sprintf(`"k%02d":"v"`, i)
	}
	tests := []struct {
		labels string     // the line's labels member ("" none)
		want   api.Labels // published with these
		err    string     // else: on stderr after "line N: "
	}{
		{labels: "", want: api.Labels{"env": "ingest", "team": "ops"}},
		{labels: `{"team":"search","user":"u-42"}`, want: api.Labels{"env": "ingest", "team": "search", "user": "u-42"}},
		{labels: `{"Team":"x"}`, err: `invalid_field: labels["Team"]: key must be a lower-case letter`},
		{labels: `{"team":""}`, err: `invalid_field: labels["team"]: value must be 1 to 128 bytes, got 0`},
		{labels: `{"team":"` + strings.Repeat("v", 129) + `"}`, err: `invalid_field: labels["team"]: value must be 1 to 128 bytes, got 129`},
		{labels: `{"team":"a\nb"}`, err: `invalid_field: labels["team"]: value must not hold control characters`},
		{labels: `{"team":7}`, err: `invalid_field: labels["team"]: must be a JSON string, got a JSON number`},
		{labels: `["team"]`, err: `invalid_field: labels: must be a JSON object, got a JSON array`},
		{labels: `{` + strings.Join(fifteen, ",") + `}`, err: `invalid_field: labels: must hold at most 16 pairs, got 17 (the event's labels with --labels)`},
	}
	var lines []string
	for i, tc := range tests {
		lines = append(lines, withLabels(fmt.Sprintf("req-%d", i), tc.labels))
	}
	path := filepath.Join(t.TempDir(), "events.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644))

	code, stdout, stderr := runCmd(t, t.Context(), "", "ingest", "--create-stream", "--nats-url", srv.URL(),
		"--labels", "env=ingest,team=ops", path)
	require.Equal(t, cli.ExitFailed, code, "bad lines make the exit status 1; stderr: %s", stderr)
	published := 0
	for i, tc := range tests {
		prefix := fmt.Sprintf("line %d: ", i+1)
		if tc.err != "" {
			assert.Contains(t, stderr, prefix+tc.err)
			continue
		}
		assert.NotContains(t, stderr, prefix)
		published++
	}
	assert.Contains(t, stdout, fmt.Sprintf("lines %d: %d valid, %d invalid", len(tests), published, len(tests)-published))

	msgs := streamMessages(t, js, published)
	got := map[string]api.Labels{}
	for _, m := range msgs {
		ev, err := events.Decode(m.Data)
		require.NoError(t, err)
		got[ev.RequestID] = ev.Labels
	}
	for i, tc := range tests {
		if tc.err == "" {
			assert.Equal(t, tc.want, got[fmt.Sprintf("req-%d", i)], "line %d", i+1)
		}
	}
}
