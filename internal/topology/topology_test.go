package topology

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
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
	require.EqualValues(t, events.MaxEventMsgBytes, info.Config.MaxMsgSize)

	// A second caller with other settings finds the stream and changes nothing.
	s2, err := EnsureAttempts(ctx, js, Config{DuplicateWindow: time.Minute})
	require.NoError(t, err)
	info2, err := s2.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, DefaultDuplicateWindow, info2.Config.Duplicates)
	require.Error(t, s2.Purge(ctx), "events are immutable")
}

func TestConfigValidation(t *testing.T) {
	for _, c := range []Config{{DuplicateWindow: -time.Second}, {Replicas: 7}, {MaxAge: -1}, {MaxAge: time.Second},
		{MaxMsgSize: -1}, {MaxMsgSize: events.MaxEventMsgBytes - 1}} {
		_, err := AttemptsStreamConfig(c)
		require.ErrorIs(t, err, ErrInvalidConfig, "%+v", c)
	}
}

// The streams refuse what they must not hold: LEDGER_ATTEMPTS a message
// over its MaxMsgSize (an event the contract allows, with its headers,
// fits), LEDGER_REJECTED a record over events.MaxRejectedMsgBytes.
func TestStreamsLimitMessageSize(t *testing.T) {
	ctx := context.Background()
	_, _, js := natstest.StartJS(t)
	_, err := EnsureAttempts(ctx, js, Config{})
	require.NoError(t, err)
	rej, err := EnsureRejected(ctx, js, Config{})
	require.NoError(t, err)
	info, err := rej.Info(ctx)
	require.NoError(t, err)
	require.EqualValues(t, events.MaxRejectedMsgBytes, info.Config.MaxMsgSize)

	publish := func(subject string, body, header int) error {
		m := nats.NewMsg(subject)
		m.Data = make([]byte, body)
		if header > 0 {
			m.Header.Set("Pad", strings.Repeat("x", header))
		}
		_, err := js.PublishMsg(ctx, m)
		return err
	}
	require.NoError(t, publish("ledger.attempts.s.r", events.MaxEventBytes, events.MaxEventHeaderBytes-64))
	var apiErr *jetstream.APIError
	require.ErrorAs(t, publish("ledger.attempts.s.r", events.MaxEventMsgBytes+1, 0), &apiErr)
	require.Equal(t, jetstream.JSErrCodeStreamMessageExceedsMaximum, apiErr.ErrorCode)
	require.NoError(t, publish("ledger.rejected.too_large.1", events.MaxEventBytes, 8<<10))
	require.ErrorAs(t, publish("ledger.rejected.too_large.2", events.MaxRejectedMsgBytes+1, 0), &apiErr)

	// A larger limit may be configured, for a stream created with it.
	cfg, err := AttemptsStreamConfig(Config{MaxMsgSize: 1 << 20})
	require.NoError(t, err)
	require.EqualValues(t, 1<<20, cfg.MaxMsgSize)
}
