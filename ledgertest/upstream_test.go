package ledgertest_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger"
	"github.com/agentledger/ledger/ledgertest"
)

// FakeUpstream serves any provider with a fake dialect, by name: here
// Gemini's generateContent, answered with its script.
func TestFakeUpstreamOfAProviderByName(t *testing.T) {
	up := ledgertest.FakeUpstream(t, "gemini", ledgertest.Succeed(ledger.Usage{InputTokens: 30, OutputTokens: 4}))
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, up.URL()+"v1beta/models/gemini-2.5-flash:generateContent",
		strings.NewReader(`{"contents":[{"parts":[{"text":"hi"}]}]}`))
	require.NoError(t, err)
	req.Header.Set("X-Goog-Api-Key", "k")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var body struct {
		UsageMetadata struct{ PromptTokenCount, CandidatesTokenCount int64 }
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	assert.Equal(t, int64(30), body.UsageMetadata.PromptTokenCount)
	assert.Equal(t, int64(4), body.UsageMetadata.CandidatesTokenCount)
	assert.Equal(t, 1, up.Requests())
}

func TestFakeUpstreamOfAnUnknownProvider(t *testing.T) {
	msg := fatalOf(func(t testing.TB) { ledgertest.FakeUpstream(t, "nobody") })
	assert.Contains(t, msg, `no fake upstream for provider "nobody"`)
	assert.Contains(t, msg, "anthropic, openai, gemini")
}
