package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/cli"
	"github.com/agentledger/ledger/internal/natstest"
)

// The publisher does not create the stream unless asked; when asked, a
// stream that exists with other settings is a warning that says how to
// change it.
func TestStreamIsCreatedOnlyWhenAsked(t *testing.T) {
	srv, _, _ := natstest.StartJS(t)
	_, line := validEvent(t, "sess", "req-1", 0)
	code, _, stderr := runCmd(t, t.Context(), line, "ingest", "--nats-url", srv.URL())
	require.Equal(t, cli.ExitUsage, code)
	code, _, stderr = runCmd(t, t.Context(), line, "ingest", "--nats-url", srv.URL(), "--create-stream")
	require.Equal(t, cli.ExitOK, code, stderr)
	code, _, stderr = runCmd(t, t.Context(), line, "ingest", "--nats-url", srv.URL(), "--create-stream", "--duplicate-window", "5m", "--log-format", "json")
	require.Equal(t, cli.ExitOK, code, stderr)
	assert.Contains(t, stderr, `LEDGER_ATTEMPTS has duplicate window 2m0s, not the 5m0s asked for`)
	assert.Contains(t, stderr, "nats stream edit LEDGER_ATTEMPTS --dupe-window 5m0s")
}

func TestNoStreamError(t *testing.T) {
	srv, _, _ := natstest.StartJS(t)
	err := run(t.Context(), []string{"ingest", "--nats-url", srv.URL()}, nil, nil, nil)
	require.Error(t, err)
	assert.Equal(t, cli.ExitUsage, cli.Code(err))
	assert.Contains(t, err.Error(), "stream LEDGER_ATTEMPTS does not exist: start the aggregator first, or pass --create-stream")
}

func TestHelpListsCommandsAndFlags(t *testing.T) {
	code, out, _ := runCmd(t, t.Context(), "", "-h")
	assert.Equal(t, cli.ExitOK, code)
	assert.Contains(t, out, "  simulate")
	assert.Contains(t, out, "  ingest")
	for _, sub := range []string{"simulate", "ingest"} {
		code, _, stderr := runCmd(t, t.Context(), "", sub, "-h")
		assert.Equal(t, cli.ExitOK, code)
		for _, f := range []string{"-nats-url", "-creds", "-nkey", "-tls-ca", "-tls-cert", "-tls-key", "-context", "-log-format", "-create-stream"} {
			assert.Contains(t, stderr, f, "%s -h lists %s", sub, f)
		}
	}
}
