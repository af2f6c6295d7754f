package provider_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/provider"
	"github.com/agentledger/ledger/internal/provider/anthropic"
	_ "github.com/agentledger/ledger/internal/provider/builtin"
	"github.com/agentledger/ledger/internal/provider/openai"
)

// Builtin is a Registry of the linked providers that a program adds its
// own to without changing the built-in set.
func TestBuiltin(t *testing.T) {
	assert.Equal(t, []string{"anthropic", "gemini", "openai"}, provider.Names())
	reg := provider.Builtin()
	assert.Equal(t, provider.Names(), reg.Names())
	require.NoError(t, reg.Add(openai.New("mistral", provider.Upstream{Origin: "https://api.mistral.ai"}, nil)))
	assert.Equal(t, []string{"anthropic", "gemini", "mistral", "openai"}, reg.Names())
	assert.Equal(t, []string{"anthropic", "gemini", "openai"}, provider.Names(), "the built-ins unchanged")
	_, ok := provider.Lookup("mistral")
	assert.False(t, ok)
}

func TestRegistryRefuses(t *testing.T) {
	reg := provider.Builtin()
	tests := []struct {
		name string
		p    provider.Provider
		want string
	}{
		{"taken", openai.New("anthropic", provider.Upstream{}, nil), "already registered"},
		{"upper case", openai.New("Mistral", provider.Upstream{}, nil), "a-z"},
		{"a path", openai.New("a/b", provider.Upstream{}, nil), "a-z"},
		{"empty", openai.New("", provider.Upstream{}, nil), "provider name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := reg.Add(tt.p)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	// Registering a built-in twice is a programming error: one
	// registration path, and a loud one.
	assert.PanicsWithValue(t, `provider: provider name: "anthropic" is already registered`, func() { provider.Register(anthropic.Provider{}) })
}
