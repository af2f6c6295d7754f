package anthropic

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/provider"
	"github.com/agentledger/ledger/internal/retry"
)

func TestRegistered(t *testing.T) {
	p, ok := provider.Lookup(Name)
	require.True(t, ok)
	assert.Equal(t, Provider{}, p)
	var found bool
	for _, c := range retry.RegisteredClassifiers() {
		found = found || c.Provider == Name
	}
	assert.True(t, found, "the classifier is registered with the provider")
	up := p.Upstream()
	assert.Equal(t, []string{"X-Api-Key", "Authorization"}, up.CredentialHeaders)
	assert.True(t, up.AtRoot)
}

func TestPassthrough(t *testing.T) {
	tests := []struct {
		path   string
		header []string
		want   bool
	}{
		{"/v1/models", []string{"Anthropic-Version", "2023-06-01"}, true},
		{"/v1/models", []string{"X-Api-Key", "k"}, true},
		{"/v1/messages/batches", nil, true},
		{"/v1/models", []string{"Authorization", "Bearer k"}, false},
		{"/v1beta/models", nil, false},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", tt.path, nil)
		for i := 0; i+1 < len(tt.header); i += 2 {
			r.Header.Set(tt.header[i], tt.header[i+1])
		}
		assert.Equal(t, tt.want, Provider{}.Upstream().Passthrough(r), "%s %v", tt.path, tt.header)
	}
}
