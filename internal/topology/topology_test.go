package topology

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/natstest"
)

func TestEnsureAttemptsCreatesOnceAndKeepsWhatExists(t *testing.T) {
	ctx := context.Background()
	_, _, js := natstest.StartJS(t)
	s, err := EnsureAttempts(ctx, js, Config{})
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	require.True(t, info.Config.DenyDelete)
	require.True(t, info.Config.DenyPurge)
	require.Equal(t, DefaultDuplicateWindow, info.Config.Duplicates)
	require.Zero(t, info.Config.MaxAge)

	// A second caller with other settings finds the stream and changes nothing.
	s2, err := EnsureAttempts(ctx, js, Config{DuplicateWindow: time.Minute})
	require.NoError(t, err)
	info2, err := s2.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, DefaultDuplicateWindow, info2.Config.Duplicates)
	require.Error(t, s2.Purge(ctx), "events are immutable")
}

func TestConfigValidation(t *testing.T) {
	for _, c := range []Config{{DuplicateWindow: -time.Second}, {Replicas: 7}, {MaxAge: -1}, {MaxAge: time.Second}} {
		_, err := AttemptsStreamConfig(c)
		require.ErrorIs(t, err, ErrInvalidConfig, "%+v", c)
	}
}
