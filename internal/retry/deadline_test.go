package retry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
)

// An attempt's deadline is the attempt timeout until the first Progress,
// then the idle timeout from each Progress; without an idle timeout
// Progress changes nothing (the attempt timeout bounds the whole stream,
// as before there was an idle timeout).
func TestProgressMovesTheDeadline(t *testing.T) {
	for _, tt := range []struct {
		name          string
		idle          time.Duration
		wantAfterIdle bool
	}{
		{"idle timeout", time.Hour, true},
		{"no idle timeout", 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := DefaultPolicy()
			p.AttemptTimeout, p.StreamIdleTimeout = time.Minute, tt.idle
			m, err := New(Options{Sink: NewMemorySink(), Policy: p})
			require.NoError(t, err)
			_, err = Do(context.Background(), m, testCall, func(ctx context.Context, _ Attempt) (int, Report, error) {
				dl, ok := ctx.Deadline()
				require.True(t, ok)
				assert.WithinDuration(t, time.Now().Add(time.Minute), dl, 10*time.Second)
				Progress(context.WithValue(ctx, struct{}{}, 1)) // a context made from the attempt's
				dl, ok = ctx.Deadline()
				require.True(t, ok)
				want := time.Now().Add(time.Minute)
				if tt.wantAfterIdle {
					want = time.Now().Add(tt.idle)
				}
				assert.WithinDuration(t, want, dl, 10*time.Second)
				return 1, Report{}, nil
			})
			require.NoError(t, err)
		})
	}
	Progress(context.Background()) // no attempt: nothing happens
}

// The context.Canceled an SDK returns when the attempt's own timeout ends
// it is classified as a retryable timeout, and still unwraps to it.
func TestTimedOutIsATimeout(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(ErrStreamIdleTimeout)
	err := timedOut(ctx, context.Canceled)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, err, ErrStreamIdleTimeout)
	assert.NotErrorIs(t, err, ErrAttemptTimeout)
	c, ok := ClassifyTransport(context.Background(), err)
	require.True(t, ok)
	assert.Equal(t, events.KindTimeout, c.Kind)
	assert.True(t, c.Retryable)
	plain := errors.New("x")
	assert.Same(t, plain, timedOut(context.Background(), plain), "no timeout: fn's error as it is")
}
