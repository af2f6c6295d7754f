package events

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/api"
)

// Events written before issue 19 (no reasoning_tokens,
// cache_creation_1h_input_tokens, service_tier or estimated_input_tokens)
// and before issue 20 (no labels) stay valid: they decode to zero subsets,
// an unknown tier, no estimate and no labels, and Marshal writes them back
// byte for byte as the older code did, so a ledger rebuilt from an old
// stream is the ledger it was.
func TestEventsBeforeIssue19StayValid(t *testing.T) {
	for _, file := range []string{"valid_success.json", "valid_error.json"} {
		t.Run(file, func(t *testing.T) {
			old, err := os.ReadFile("testdata/" + file)
			require.NoError(t, err)
			for _, name := range []string{"reasoning_tokens", "cache_creation_1h_input_tokens", "service_tier", "estimated_input_tokens", "labels"} {
				require.NotContains(t, string(old), name, "the fixture is an event of the older contract")
			}
			a, err := Decode(old)
			require.NoError(t, err)
			require.Zero(t, a.Usage.ReasoningTokens)
			require.Zero(t, a.Usage.CacheCreation1hInputTokens)
			require.Empty(t, a.ServiceTier)
			require.Zero(t, a.EstimatedInputTokens)
			require.Nil(t, a.Labels)

			var compact bytes.Buffer
			require.NoError(t, json.Compact(&compact, old))
			back, err := Marshal(a)
			require.NoError(t, err)
			require.Equal(t, compact.String(), string(back), "an old event is written back as it was")
		})
	}
}

// An event with every new field goes through Marshal and Decode whole, and
// Marshal writes what encoding/json writes.
func TestNewFieldsRoundTrip(t *testing.T) {
	a := wantError(t)
	a.Usage.CacheCreation1hInputTokens = 200
	a.Usage.ReasoningTokens = 40
	a.ServiceTier = "priority"
	a.EstimatedInputTokens = 1234
	a.Labels = api.Labels{"team": "search", "user": "u-42"}
	require.NoError(t, a.Validate())
	data, err := Marshal(&a)
	require.NoError(t, err)
	for _, member := range []string{`"cache_creation_1h_input_tokens":200`, `"reasoning_tokens":40`, `"service_tier":"priority"`, `"estimated_input_tokens":1234`, `"labels":{"team":"search","user":"u-42"}`} {
		require.Contains(t, string(data), member)
	}
	ref, err := refMarshal(&a)
	require.NoError(t, err)
	require.Equal(t, string(ref), string(data))
	back, err := Decode(data)
	require.NoError(t, err)
	require.Equal(t, &a, back)
}

func TestServiceTierNormalises(t *testing.T) {
	for in, want := range map[string]string{
		"standard": "standard", "Priority": "priority", " flex ": "flex", "": "",
		"on demand": "", strings.Repeat("x", MaxServiceTierLength+1): "", "déjà": "",
	} {
		require.Equal(t, want, ServiceTier(in), "ServiceTier(%q)", in)
	}
}

func TestUsageSubsetsSum(t *testing.T) {
	u := Usage{InputTokens: 10, OutputTokens: 8, CacheReadInputTokens: 2, CacheCreationInputTokens: 5, CacheCreation1hInputTokens: 3, ReasoningTokens: 4}
	v := Usage{InputTokens: 1, OutputTokens: 2, CacheReadInputTokens: 0, CacheCreationInputTokens: 1, CacheCreation1hInputTokens: 1, ReasoningTokens: 2}
	sum := u.Add(v)
	require.Equal(t, Usage{InputTokens: 11, OutputTokens: 10, CacheReadInputTokens: 2, CacheCreationInputTokens: 6, CacheCreation1hInputTokens: 4, ReasoningTokens: 6}, sum)
	require.Equal(t, u, sum.Sub(v))
	require.False(t, Usage{ReasoningTokens: 1}.IsZero())
	require.False(t, Usage{CacheCreation1hInputTokens: 1}.IsZero())
}
