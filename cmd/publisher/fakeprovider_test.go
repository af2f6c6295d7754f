package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/cli"
	"github.com/agentledger/ledger/internal/sim/fakeprovider"
	"github.com/agentledger/ledger/internal/testkit"
)

func TestFakeProviderServesAndWritesTheTruth(t *testing.T) {
	truthFile := filepath.Join(t.TempDir(), "truth.json")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb testkit.Logs // the command's stdout and stderr
	listening := out.Watch("listening on ")
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"fakeprovider", "--listen", "127.0.0.1:0", "--seed", "5", "--rate-limit", "0", "--overload", "0",
			"--server-error", "0", "--billed-timeout", "0", "--bad-request", "0", "--truth", truthFile}, strings.NewReader(""), &out, &errb)
	}()
	var url string
	select {
	case line := <-listening:
		_, url, _ = strings.Cut(line, "listening on ")
	case err := <-done:
		t.Fatalf("fakeprovider ended: %v: %s", err, errb.String())
	case <-time.After(30 * time.Second):
		t.Fatal("fakeprovider did not start")
	}

	req, err := http.NewRequest(http.MethodPost, url+"/v1/messages", strings.NewReader(`{"model":"claude-x","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`))
	require.NoError(t, err)
	req.Header.Set("X-Api-Key", "k")
	req.Header.Set(fakeprovider.HeaderSessionID, "sess-fp")
	req.Header.Set(fakeprovider.HeaderRequestID, "req-fp")
	req.Header.Set(fakeprovider.HeaderAttempt, "0")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)

	cancel()
	require.NoError(t, <-done, errb.String())
	assert.Contains(t, out.String(), "truth written to "+truthFile)
	b, err := os.ReadFile(truthFile)
	require.NoError(t, err)
	var truth fakeprovider.Truth
	require.NoError(t, json.Unmarshal(b, &truth))
	require.Contains(t, truth.Requests, "req-fp")
	assert.Equal(t, "sess-fp", truth.Requests["req-fp"].SessionID)
	assert.Equal(t, int64(1), truth.Sessions["sess-fp"].Attempts)
	assert.Equal(t, uint64(5), truth.Seed)
}

func TestFakeProviderFlags(t *testing.T) {
	for _, args := range [][]string{
		{"fakeprovider", "--rate-limit", "1.5"},
		{"fakeprovider", "--broken-stream", "0.6", "--rate-limit", "0.6"},
		{"fakeprovider", "extra"},
		{"fakeprovider", "--listen", "256.0.0.1:99999"},
		{"fakeprovider", "--truth", filepath.Join(t.TempDir(), "no", "such", "dir", "t.json")},
	} {
		code, _, stderr := runCmd(t, context.Background(), "", args...)
		assert.Equal(t, cli.ExitUsage, code, "%v: %s", args, stderr)
	}
}
