package topology

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/testkit"
)

func TestPrepareAttempts(t *testing.T) {
	_, _, js := natstest.StartJS(t)
	ctx := context.Background()
	var logs testkit.Logs
	logger := logs.TextLogger(slog.LevelInfo)

	require.ErrorIs(t, PrepareAttempts(ctx, js, nil, logger), ErrNoAttempts, "missing and not to be created")
	require.NoError(t, PrepareAttempts(ctx, js, &Config{DuplicateWindow: time.Minute}, logger), "created")
	s, err := js.Stream(ctx, names.AttemptsStream)
	require.NoError(t, err)
	assert.Equal(t, time.Minute, s.CachedInfo().Config.Duplicates)
	require.NoError(t, PrepareAttempts(ctx, js, nil, logger), "exists")
	assert.Empty(t, logs.String())

	require.NoError(t, PrepareAttempts(ctx, js, &Config{DuplicateWindow: 5 * time.Minute}, logger), "exists, asked otherwise")
	assert.Contains(t, logs.String(), "duplicate window", "the difference is a warning")
	s, err = js.Stream(ctx, names.AttemptsStream)
	require.NoError(t, err)
	assert.Equal(t, time.Minute, s.CachedInfo().Config.Duplicates, "the existing setting is kept")
}
