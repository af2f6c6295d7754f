package fleet

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/names"
)

func TestKeys(t *testing.T) {
	tests := []struct{ name, want string }{
		{"anthropic/claude-sonnet-4-5", "breaker.anthropic/claude-sonnet-4-5"},
		{"bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0", "breaker.bedrock/anthropic=2Eclaude-3-5-sonnet-20240620-v1=3A0"},
		{"acct=1 *>", "breaker.acct=3D1=20=2A=3E"},
		{"é", "breaker.=C3=A9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := key(names.UpstreamBreaker, tt.name)
			assert.Equal(t, tt.want, k)
			kind, name, ok := parseKey(k)
			require.True(t, ok)
			assert.Equal(t, names.UpstreamBreaker, kind)
			assert.Equal(t, tt.name, name)
		})
	}
	for _, bad := range []string{"breaker", "breaker.a.b", "breaker.=", "breaker.=4", "breaker.=zz", "breaker."} {
		_, _, ok := parseKey(bad)
		assert.False(t, ok, bad)
	}
}

func TestRecordsFromTheNetwork(t *testing.T) {
	tests := []struct {
		name string
		data string
		ok   bool
	}{
		{"valid", `{"v":1,"state":"open","generation":3,"until":"2026-01-01T00:00:00Z","by":"p"}`, true},
		{"unknown members are ignored", `{"v":1,"state":"closed","generation":0,"future":[1,2]}`, true},
		{"a later version", `{"v":2,"state":"closed"}`, false},
		{"an unknown state", `{"v":1,"state":"ajar"}`, false},
		{"negative failures", `{"v":1,"state":"closed","failures":-1}`, false},
		{"not JSON", `{"v":1,`, false},
		{"null", `null`, false},
		{"a string", `"closed"`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ok := decode([]byte(tt.data), (*breakerRecord).valid)
			assert.Equal(t, tt.ok, ok)
		})
	}
	c, ok := decode([]byte(`{"v":1,"levels":{"requests":2.5,"input_tokens":-10,"bogus":3},"at":"2026-01-01T00:00:00Z"}`), (*capacityRecord).valid)
	require.True(t, ok)
	assert.Equal(t, dimsOf[float64]{guard.Requests: 2.5, guard.InputTokens: -10}, c.Levels)
	_, ok = decode([]byte(`{"v":1,"per_minute":{"requests":-5}}`), (*limitsRecord).valid)
	assert.False(t, ok)
	_, ok = decode([]byte(`{"v":1,"slot_ms":0,"slots":[]}`), (*budgetRecord).valid)
	assert.False(t, ok)
	_, ok = decode([]byte(`{"v":1,"slot_ms":5000,"slots":[{"slot":1,"first":-1}]}`), (*budgetRecord).valid)
	assert.False(t, ok)
	b := mustJSON(limitsRecord{V: 1, Limits: dimsOf[int64]{guard.Requests: 50, guard.OutputTokens: 8000}, By: "p"})
	assert.JSONEq(t, `{"v":1,"per_minute":{"requests":50,"output_tokens":8000},"by":"p","at":"0001-01-01T00:00:00Z"}`, string(b))
}
