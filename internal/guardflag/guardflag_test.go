package guardflag

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/guard"
)

func parse(t *testing.T, args ...string) (*Flags, error) {
	t.Helper()
	var f Flags
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	f.Register(fs)
	require.NoError(t, fs.Parse(args))
	cfg := guard.Config{Budget: guard.Budget{On: true}}
	return &f, f.Apply(&cfg)
}

func TestLimitsAndBudget(t *testing.T) {
	file := filepath.Join(t.TempDir(), "limits")
	require.NoError(t, os.WriteFile(file, []byte("# the account's limits\nanthropic/org-42 = rpm:4000, itpm:2_000_000 # org\n\n"), 0o600))
	var f Flags
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	f.Register(fs)
	require.NoError(t, fs.Parse([]string{"--limit", "gemini/gemini-2.5-flash=rpm:1000,tpm:4000000", "--limits-file", file,
		"--retry-budget-percent", "50", "--retry-budget-min", "3", "--retry-budget-window", "2m"}))
	cfg := guard.Config{Budget: guard.Budget{On: true}}
	require.NoError(t, f.Apply(&cfg))
	assert.Equal(t, map[string]guard.Limits{
		"gemini/gemini-2.5-flash": {guard.Requests: 1000, guard.Tokens: 4_000_000},
		"anthropic/org-42":        {guard.Requests: 4000, guard.InputTokens: 2_000_000},
	}, cfg.Limits)
	assert.Equal(t, guard.Budget{On: true, Ratio: 0.5, Min: 6, Window: 2 * time.Minute, Exact: true}, cfg.Budget)
	_, err := guard.New(cfg)
	require.NoError(t, err)
}

func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--limit", "gemini/x"}, "--limit: \"gemini/x\" must be UPSTREAM=KEY:N"},
		{[]string{"--limit", "gemini/x=rpm:0"}, "rpm must be a whole number of at least 1 per minute"},
		{[]string{"--limit", "gemini/x=qpm:3"}, "with KEY rpm, tpm, itpm or otpm"},
		{[]string{"--limit", "gemini/x=rpm:3,rpm:4"}, "rpm is given twice"},
		{[]string{"--limit", "g/x=rpm:3", "--limit", "g/x=tpm:4"}, "the limits of g/x are given twice"},
		{[]string{"--limits-file", "/nonexistent/limits"}, "--limits-file: open /nonexistent/limits"},
		{[]string{"--retry-budget-percent", "-1"}, "--retry-budget-percent: -1 must be from 0 to 1000"},
		{[]string{"--retry-budget-min", "-1"}, "--retry-budget-min: -1 must be from 0"},
		{[]string{"--retry-budget-window", "10ms"}, "--retry-budget-window: 10ms must be from 1s to 1h"},
	} {
		_, err := parse(t, tc.args...)
		assert.ErrorContains(t, err, tc.want, "%v", tc.args)
	}
}

// A budget of no percentage and no minimum is meant: no retry.
func TestZeroBudgetIsNoRetries(t *testing.T) {
	b, err := Budget(0, 0, time.Minute, FlagNames)
	require.NoError(t, err)
	s, err := guard.New(guard.Config{Budget: b})
	require.NoError(t, err)
	g := s.Get("anthropic/m")
	g.First()
	var be *guard.BudgetError
	require.ErrorAs(t, g.Retry(), &be)
	assert.Contains(t, be.Error(), "--retry-budget-percent")
}
