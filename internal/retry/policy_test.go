package retry

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDefaultPolicy(t *testing.T) {
	p := DefaultPolicy()
	assert.Equal(t, Policy{
		MaxRetries: 2, BaseDelay: time.Second, MaxDelay: 30 * time.Second,
		Jitter: 0.2, HintCap: 60 * time.Second, AttemptTimeout: 10 * time.Minute, StreamIdleTimeout: 5 * time.Minute,
	}, p)
	require.NoError(t, p.Validate())
}

func TestPolicyValidate(t *testing.T) {
	mod := func(f func(*Policy)) Policy {
		p := DefaultPolicy()
		f(&p)
		return p
	}
	tests := []struct {
		name  string
		p     Policy
		field string // "" for valid
	}{
		{"default", DefaultPolicy(), ""},
		{"no retries", mod(func(p *Policy) { p.MaxRetries = 0 }), ""},
		{"most retries", mod(func(p *Policy) { p.MaxRetries = 1000 }), ""},
		{"no jitter", mod(func(p *Policy) { p.Jitter = 0 }), ""},
		{"full jitter", mod(func(p *Policy) { p.Jitter = 1 }), ""},
		{"max equals base", mod(func(p *Policy) { p.MaxDelay = p.BaseDelay }), ""},
		{"attempt timeout", mod(func(p *Policy) { p.AttemptTimeout = time.Second }), ""},
		{"negative retries", mod(func(p *Policy) { p.MaxRetries = -1 }), "MaxRetries"},
		{"too many retries", mod(func(p *Policy) { p.MaxRetries = 1001 }), "MaxRetries"},
		{"zero base", mod(func(p *Policy) { p.BaseDelay = 0 }), "BaseDelay"},
		{"negative base", mod(func(p *Policy) { p.BaseDelay = -time.Second }), "BaseDelay"},
		{"max below base", mod(func(p *Policy) { p.MaxDelay = p.BaseDelay - 1 }), "MaxDelay"},
		{"negative jitter", mod(func(p *Policy) { p.Jitter = -0.1 }), "Jitter"},
		{"jitter over 1", mod(func(p *Policy) { p.Jitter = 1.5 }), "Jitter"},
		{"NaN jitter", mod(func(p *Policy) { p.Jitter = math.NaN() }), "Jitter"},
		{"zero hint cap", mod(func(p *Policy) { p.HintCap = 0 }), "HintCap"},
		{"negative attempt timeout", mod(func(p *Policy) { p.AttemptTimeout = -1 }), "AttemptTimeout"},
		{"partial policy names the first missing field", Policy{MaxRetries: 5}, "BaseDelay"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.Validate()
			if tt.field == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalidPolicy)
			var pe *PolicyError
			require.True(t, errors.As(err, &pe))
			assert.Equal(t, tt.field, pe.Field)
			assert.Contains(t, err.Error(), tt.field)
			assert.Contains(t, err.Error(), "must")
		})
	}
}
