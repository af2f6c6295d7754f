package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/cli"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/provider/fakekit"
	"github.com/agentledger/ledger/internal/provider/openai"
	"github.com/agentledger/ledger/internal/sim/fakeprovider"
)

// TestUpstreamFlags: each spec's form gives the provider it names, at the
// origin it says or the preset's; nothing is mounted that is not named.
func TestUpstreamFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "upstreams")
	require.NoError(t, os.WriteFile(file, []byte("# the lab's servers\n\n  lab=vllm,http://10.0.0.5:8000  # GPU box\ngroq\n"), 0o600))
	u := upstreamFlags{specs: []string{"mistral", "corp=openai-compatible,https://llm.corp.example/api/", "local=ollama"}, file: file}
	ps, err := u.parse()
	require.NoError(t, err)
	want := []struct{ name, preset, origin string }{
		{"mistral", "mistral", "https://api.mistral.ai"},
		{"corp", "corp", "https://llm.corp.example/api"},
		{"local", "ollama", "http://localhost:11434"},
		{"lab", "vllm", "http://10.0.0.5:8000"},
		{"groq", "groq", "https://api.groq.com/openai"},
	}
	require.Len(t, ps, len(want))
	for i, w := range want {
		assert.Equal(t, w.name, ps[i].Name())
		assert.Equal(t, w.origin, ps[i].Upstream().Origin, w.name)
		p, ok := openai.PresetOf(ps[i])
		require.True(t, ok)
		assert.Equal(t, w.preset, p.Name, w.name)
	}

	none, err := (&upstreamFlags{}).parse()
	require.NoError(t, err)
	assert.Empty(t, none, "no preset is mounted unless named")
}

func TestUpstreamFlagsRefused(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad")
	require.NoError(t, os.WriteFile(bad, []byte("mistral\n# fine\nlocal=ollama,http://localhost:11434/v1\n"), 0o600))
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--upstream", "mistrall"}, `--upstream "mistrall": "mistrall" is not a preset (mistral, groq`},
		{[]string{"--upstream", "corp=openai-compatible"}, `--upstream "corp=openai-compatible": openai-compatible needs its URL`},
		{[]string{"--upstream", "corp=openai-compatible,https://llm.corp/v1"}, `origin: "https://llm.corp/v1" must not end in /v1`},
		{[]string{"--upstream", "corp=llamacpp,http://x"}, `kind "llamacpp" is neither openai-compatible nor a preset`},
		{[]string{"--upstream", "Corp=mistral"}, `--upstream "Corp=mistral": name: "Corp" must be 1 to 32 characters`},
		{[]string{"--upstream", "openai=openai-compatible,http://localhost:9"}, `name "openai" is a built-in provider's`},
		{[]string{"--upstream", "mistral", "--upstream", "mistral=mistral"}, `--upstream "mistral=mistral": name "mistral" is already the upstream of --upstream "mistral"`},
		{[]string{"--upstream", "corp=", "--upstream", "x"}, "names no kind"},
		{[]string{"--upstream", "mistral,https://api.mistral.ai"}, "has a URL but no NAME="},
		{[]string{"--upstream", ""}, "empty: want NAME=openai-compatible,URL"},
		{[]string{"--upstreams", filepath.Join(dir, "missing")}, "--upstreams: open"},
		{[]string{"--upstreams", bad}, "--upstreams " + bad + ":3: origin: \"http://localhost:11434/v1\" must not end in /v1"},
		{[]string{"--upstream", "ftp=openai-compatible,ftp://x"}, "must start with http:// or https://"},
	}
	for _, tt := range tests {
		assertRefused(t, tt.args, tt.want)
	}
}

// assertRefused runs the command with args and checks it fails as a usage
// error whose message says want.
func assertRefused(t *testing.T, args []string, want string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := command(context.Background(), args, &out, &errb)
	assert.Equal(t, cli.ExitUsage, code, "%v", args)
	assert.Contains(t, errb.String(), want, "%v", args)
}

// The command mounts a named upstream at /NAME/ and records its calls
// under NAME; a preset not named is not mounted (its path is no mount).
func TestRunMountsTheNamedUpstreams(t *testing.T) {
	srv, _, js := natstest.StartJS(t)
	mistral, err := openai.Compatible("mistral", openai.Config{Preset: "mistral"})
	require.NoError(t, err)
	fp, err := fakeprovider.New(fakeprovider.Options{
		Script:   []fakeprovider.Step{{Fault: fakekit.FaultNone, Usage: events.Usage{InputTokens: 21, OutputTokens: 4}}},
		Dialects: []*fakekit.Dialect{mistral.(fakekit.Faker).Fake()},
	})
	require.NoError(t, err)
	t.Cleanup(fp.Close)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, done, errb := startCommand(t, ctx, "run", "--nats-url", srv.URL(), "--listen", "127.0.0.1:0", "--create-stream",
		"--upstream", "mistral="+"mistral,"+strings.TrimSuffix(fp.BaseURL("mistral"), "/v1/"))
	resp := postTo(t, addr, "/mistral/v1/chat/completions", `{"model":"mistral-small-latest","messages":[{"role":"user","content":"hi"}]}`,
		"Authorization", "Bearer k", "X-Ledger-Session-Id", "sess-up")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	resp = postTo(t, addr, "/ollama/v1/chat/completions", `{"model":"llama3.2","messages":[{"role":"user","content":"hi"}]}`,
		"Authorization", "Bearer k", "X-Ledger-Session-Id", "sess-up")
	assert.NotEqual(t, http.StatusOK, resp.StatusCode, "ollama was not named: no mount, no local service reached")
	stopCommand(t, cancel, done, errb)
	assert.Contains(t, errb.String(), "upstreams.mistral="+strings.TrimSuffix(fp.BaseURL("mistral"), "/v1/"))
	assert.NotContains(t, errb.String(), "upstreams.ollama")
	assert.EqualValues(t, 1, fp.Requests(), "the fake provider saw the mistral call only")

	s, err := js.Stream(context.Background(), names.AttemptsStream)
	require.NoError(t, err)
	info, err := s.Info(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 1, info.State.Msgs, "one event: the mistral call's; the other was not accounted")
	m, err := s.GetMsg(context.Background(), 1)
	require.NoError(t, err)
	ev, err := events.Decode(m.Data)
	require.NoError(t, err)
	assert.Equal(t, "mistral", ev.Provider)
	assert.Equal(t, events.Usage{InputTokens: 21, OutputTokens: 4}, ev.Usage)
}
