package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/cli"
	"github.com/agentledger/ledger/internal/ledgertest"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/sim/fakeprovider"
)

// The gateway runs with exactly the gateway role of the shipped example:
// named and unnamed calls, fleet limits on (the default), its buckets
// created by itself.
func TestRunWithTheGatewayRoleOnly(t *testing.T) {
	srv := ledgertest.StartRoles(t)
	fp, err := fakeprovider.Listen("127.0.0.1:0", fakeprovider.Options{Seed: 5, Mix: fakeprovider.Mix{RateLimit: 0.3}})
	require.NoError(t, err)
	t.Cleanup(fp.Close)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// The unnamed calls get a new request ID each run, so their faults
	// differ from run to run: with the default 2 retries, 3 429s in a row
	// (2.7 % at this mix) ended one in about 20 runs with the upstream's
	// 429. 10 retries make that 2e-6.
	args := append([]string{"run", "--listen", "127.0.0.1:0", "--anthropic-url", fp.URL(), "--openai-url", fp.URL(),
		"--forward-ledger-headers", "--retry-base-delay", "1ms", "--max-retries", "10"}, srv.RoleArgs("gateway")...)
	addr, done, errb := startCommand(t, ctx, args...)
	for i := range 4 {
		req, err := http.NewRequest(http.MethodPost, addr+"/v1/messages", strings.NewReader(`{"model":"claude-x","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`))
		require.NoError(t, err)
		req.Header.Set("X-Ledger-Session-Id", "sess-role")
		req.Header.Set("X-Api-Key", "sk-test-role")
		if i%2 == 0 {
			req.Header.Set("X-Ledger-Request-Id", fmt.Sprintf("role-call-%d", i))
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, "call %d: %s", i, errb.String())
	}
	stopCommand(t, cancel, done, errb)
	assert.NotContains(t, errb.String(), "permission")

	_, js := srv.ConnectAs(t, "reader")
	s, err := js.Stream(t.Context(), names.AttemptsStream)
	require.NoError(t, err)
	info, err := s.Info(t.Context())
	require.NoError(t, err)
	assert.Equal(t, uint64(fp.Truth().Total.Attempts), info.State.Msgs, "one event per attempt")
}

// A gateway role missing one grant is told which, at once.
func TestGatewayMissingAGrantIsToldWhich(t *testing.T) {
	const grant = "$JS.API.STREAM.CREATE.KV_ledger_gateway_attempts"
	srv := ledgertest.StartRoles(t, natstest.WithoutGrant("gateway", grant))
	var out, errb bytes.Buffer
	begin := time.Now()
	code := command(t.Context(), append([]string{"run", "--listen", "127.0.0.1:0"}, srv.RoleArgs("gateway")...), &out, &errb)
	took := time.Since(begin)
	t.Logf("exit %d after %s", code, took)
	assert.Equal(t, cli.ExitUsage, code)
	assert.Contains(t, errb.String(), `may not publish to "`+grant+`"`)
	assert.Less(t, took, 3*time.Second, "not a timeout")
}
