package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/ledgertest"
)

// requireNodeEnv, when set (CI sets it), makes a missing node or missing
// npm packages fail the Node test instead of skipping it.
const requireNodeEnv = "LEDGER_REQUIRE_NODE"

// nodePackages are the official clients e2e/node/gateway.mjs drives.
var nodePackages = []string{"openai", "@anthropic-ai/sdk", "@google/genai"}

// nodeOrSkip returns the node binary, or skips the test (fails it under
// LEDGER_REQUIRE_NODE) when node or the npm packages are missing.
func nodeOrSkip(t *testing.T) string {
	t.Helper()
	missing := func(what string) {
		msg := what + ": the Node test of the gateway needs node (20 or later) and `npm ci --prefix e2e/node` (see README, Agents in any language)"
		if os.Getenv(requireNodeEnv) != "" {
			t.Fatal(msg + "; " + requireNodeEnv + " is set, so it may not be skipped")
		}
		t.Skip(msg)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node is not on PATH")
	}
	for _, p := range nodePackages {
		if _, err := os.Stat(filepath.Join("node", "node_modules", p, "package.json")); err != nil {
			missing("the npm package " + p + " is not installed in e2e/node")
		}
	}
	return node
}

// nodeResult is what gateway.mjs prints.
type nodeResult struct {
	Sessions map[string]struct {
		Calls     int64 `json:"calls"`
		Succeeded int64 `json:"succeeded"`
	} `json:"sessions"`
	Idempotency *struct {
		OK        bool   `json:"ok"`
		RequestID string `json:"request_id"`
		Error     string `json:"error"`
	} `json:"idempotency"`
}

// The official npm clients of the three providers through the gateway,
// every route, streaming and not, against the fake provider with every
// fault: the ledger equals the provider's truth to the token, each client
// saw exactly the calls the provider answered successfully succeed, and a
// client's own retry with an Idempotency-Key continues its request.
func TestGatewayNodeClientsLedgerEqualsTruth(t *testing.T) {
	node := nodeOrSkip(t)
	rig := startGatewayRig(t, 21, faultMix, rigPolicy())
	key := findRequestID(t, rig.fp.Plan(), "node-idem", 3) // the gateway's 3 attempts fail, the client's retry succeeds

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "gateway.mjs")
	cmd.Dir = "node"
	cmd.Env = append(os.Environ(), "GATEWAY_URL="+rig.url, "RUN=node", "CALLS="+strconv.Itoa(callsPerRoute), "IDEM_KEY="+key)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "node: %s", stderr.String())
	var res nodeResult
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &res), "node printed: %s", stdout.String())

	truth := rig.requireLedgerEqualsTruth(t)
	require.Len(t, res.Sessions, 10)
	for session, got := range res.Sessions {
		want, ok := truth.Sessions[session]
		require.True(t, ok, "session %s is not in the truth", session)
		assert.Equal(t, got.Calls, want.Requests, "session %s: one request per call", session)
		assert.Equal(t, want.RequestsSucceeded, got.Succeeded, "session %s: the client saw what the provider answered", session)
	}
	assert.Positive(t, truth.Total.Failed, "the faults struck")

	require.NotNil(t, res.Idempotency)
	assert.True(t, res.Idempotency.OK, "the client's retry succeeded: %s", res.Idempotency.Error)
	assert.Equal(t, key, res.Idempotency.RequestID)
	req := rig.ledger.Request(t, key)
	assert.Equal(t, 4, req.Attempts, "3 attempts of the first call, 1 of the client's retry")
	assert.Equal(t, 3, req.WinningAttempt)
	assert.Equal(t, ledgertest.StatusSucceeded, req.Status)
}
