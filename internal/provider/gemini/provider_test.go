package gemini

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/provider"
)

func TestRegistered(t *testing.T) {
	p, ok := provider.Lookup(Name)
	require.True(t, ok)
	assert.Equal(t, Provider{}, p)
	up := p.Upstream()
	assert.Equal(t, []string{"X-Goog-Api-Key"}, up.CredentialHeaders)
	assert.Equal(t, "key", up.CredentialQuery)
	assert.True(t, up.AtRoot)
}

func TestPassthrough(t *testing.T) {
	tests := []struct {
		target string
		header []string
		want   bool
	}{
		{"/v1beta/models", nil, true},
		{"/v1alpha/files", nil, true},
		{"/v1/files?key=abc", nil, true},
		{"/upload/v1beta/files", []string{"X-Goog-Api-Key", "k"}, true},
		{"/download/v1beta/files/x", nil, true},
		{"/v1/models", []string{"X-Goog-Api-Key", "k"}, true},
		{"/v1/models", []string{"Authorization", "Bearer k"}, false},
		{"/v1/messages/batches", nil, false},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", tt.target, nil)
		for i := 0; i+1 < len(tt.header); i += 2 {
			r.Header.Set(tt.header[i], tt.header[i+1])
		}
		assert.Equal(t, tt.want, Provider{}.Upstream().Passthrough(r), "%s %v", tt.target, tt.header)
	}
}
