package fakeprovider_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/provider/anthropic"
	"github.com/agentledger/ledger/internal/provider/fakekit"
	"github.com/agentledger/ledger/internal/provider/gemini"
	"github.com/agentledger/ledger/internal/provider/openai"
	"github.com/agentledger/ledger/internal/sim/fakeprovider"
	fpt "github.com/agentledger/ledger/internal/sim/fakeprovider/fakeprovidertest"
)

// dialects are the built-in providers' dialects, as the server's tests
// speak them.
func dialects() []*fakekit.Dialect {
	return []*fakekit.Dialect{anthropic.FakeDialect(), openai.OpenAIFakeDialect(), gemini.FakeDialect()}
}

// request is a minimal valid request of each dialect: its path under
// the base URL, its body and its credential header.
var requests = map[string]struct{ path, body, key, value string }{
	"anthropic": {"v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":4096,"messages":[{"role":"user","content":"hi"}]}`, "X-Api-Key", "k"},
	"openai":    {"chat/completions", `{"model":"gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer k"},
	"gemini":    {"v1beta/models/gemini-2.5-flash:generateContent", `{"contents":[{"parts":[{"text":"hi"}]}]}`, "X-Goog-Api-Key", "k"},
}

// post sends one attempt of call id to provider at base (its base URL)
// and returns the response, its body read.
func post(t *testing.T, ctx context.Context, base, provider, id string) *http.Response {
	t.Helper()
	r := requests[provider]
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+r.path, strings.NewReader(r.body))
	require.NoError(t, err)
	req.Header.Set(r.key, r.value)
	for k, v := range fpt.LedgerHeaders(id, 0) {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// Every dialect is served under its prefix (BaseURL), and, by Listen, at
// the API's own paths; the truth records each call under its provider.
func TestServesEveryDialect(t *testing.T) {
	s := fpt.Listen(t, fakeprovider.Options{Seed: 9}, dialects()...)
	for _, d := range dialects() {
		t.Run(d.Provider, func(t *testing.T) {
			assert.Equal(t, s.URL()+d.Prefix+d.BasePath, s.BaseURL(d.Provider))
			resp := post(t, t.Context(), s.BaseURL(d.Provider), d.Provider, "prefixed-"+d.Provider)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			root := s.URL() + "/"
			if d.Provider == "openai" {
				root += "v1/"
			}
			resp = post(t, t.Context(), root, d.Provider, "root-"+d.Provider)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			tr := s.Truth()
			for _, id := range []string{"prefixed-" + d.Provider, "root-" + d.Provider} {
				assert.Equal(t, d.Provider, tr.Requests[id].Provider)
				assert.Equal(t, s.PlannedUsage(d.Provider, id), tr.Requests[id].Usage)
			}
		})
	}
	assert.Empty(t, s.BaseURL("nobody"))
	assert.Equal(t, int64(6), s.Requests())
}

// New serves the API's paths under the prefixes only.
func TestNewServesThePrefixesOnly(t *testing.T) {
	s := fpt.Start(t, fakeprovider.Options{Seed: 9}, dialects()...)
	resp := post(t, t.Context(), s.URL()+"/", "anthropic", "root")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// Two dialects of the same API (an OpenAI-compatible provider): each has
// its prefix, and the root paths are the first one's.
func TestCompatibleDialectsShareTheAPI(t *testing.T) {
	mistral := openai.FakeDialect("mistral", openai.FakeOptions{})
	s := fpt.Listen(t, fakeprovider.Options{Seed: 9}, openai.OpenAIFakeDialect(), mistral)
	require.Equal(t, http.StatusOK, post(t, t.Context(), s.BaseURL("mistral"), "openai", "m-1").StatusCode)
	require.Equal(t, http.StatusOK, post(t, t.Context(), s.URL()+"/v1/", "openai", "o-1").StatusCode)
	tr := s.Truth()
	assert.Equal(t, "mistral", tr.Requests["m-1"].Provider)
	assert.Equal(t, "openai", tr.Requests["o-1"].Provider)
}

func TestDialectsValidation(t *testing.T) {
	bad := anthropic.FakeDialect()
	bad.Prefix = "anthropic/"
	clash := openai.FakeDialect("other", openai.FakeOptions{Prefix: "/openai"})
	for name, ds := range map[string][]*fakekit.Dialect{
		"bad prefix":        {bad},
		"twice":             {anthropic.FakeDialect(), anthropic.FakeDialect()},
		"prefix taken":      {openai.OpenAIFakeDialect(), clash},
		"nil":               {nil},
		"none (empty list)": {},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := fakeprovider.New(fakeprovider.Options{Dialects: ds})
			require.ErrorIs(t, err, fakeprovider.ErrInvalidOptions)
		})
	}
}

func TestCloseReleasesStalledRequests(t *testing.T) {
	s, err := fakeprovider.New(fakeprovider.Options{Seed: 1, Mix: fakeprovider.Mix{BilledTimeout: 1}, Dialects: dialects()})
	require.NoError(t, err)
	done := make(chan int, 1)
	go func() {
		// No deadline: only Close can end the stall.
		req, _ := http.NewRequest(http.MethodPost, s.BaseURL("anthropic")+"v1/messages", strings.NewReader(requests["anthropic"].body))
		req.Header.Set("X-Api-Key", "k")
		for k, v := range fpt.LedgerHeaders("stuck", 0) {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	require.Eventually(t, func() bool { return s.Truth().Total.Attempts == 1 }, 30*time.Second, time.Millisecond)
	s.Close()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not release the stalled request")
	}
	assert.Equal(t, fakeprovider.FaultTimeout, s.Truth().Requests["stuck"].Attempts[0].Outcome)
	s.Close() // idempotent
}
