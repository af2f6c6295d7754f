package retry

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
)

func TestMemorySinkCopies(t *testing.T) {
	var s MemorySink // the zero value works
	ev := &events.Attempt{EventID: "e1", Attempt: 0, Error: &events.AttemptError{Kind: events.KindServer, Message: "first"}}
	require.NoError(t, s.Publish(context.Background(), ev))
	// The publisher reuses its event: the stored copy must not change.
	ev.EventID = "e2"
	ev.Attempt = 1
	ev.Error.Message = "second"
	require.NoError(t, s.Publish(context.Background(), ev))
	ev.Error = nil
	ev.EventID = "e3"
	require.NoError(t, s.Publish(context.Background(), ev))

	got := s.Events()
	require.Len(t, got, 3)
	assert.Equal(t, "e1", got[0].EventID)
	assert.Equal(t, "first", got[0].Error.Message)
	assert.Equal(t, "e2", got[1].EventID)
	assert.Equal(t, "second", got[1].Error.Message)
	assert.Nil(t, got[2].Error)
	assert.Equal(t, 3, s.Len())

	got[0].EventID = "mutated"
	assert.Equal(t, "e1", s.Events()[0].EventID, "Events returns a copy")
}

func TestMemorySinkResetAndClose(t *testing.T) {
	s := NewMemorySink()
	ev := &events.Attempt{EventID: "e1"}
	require.NoError(t, s.Publish(context.Background(), ev))
	old := s.Events()
	s.Reset()
	assert.Zero(t, s.Len())
	require.NoError(t, s.Publish(context.Background(), &events.Attempt{EventID: "e2"}))
	assert.Equal(t, "e1", old[0].EventID, "a slice from before Reset is not overwritten")

	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "idempotent")
	assert.ErrorIs(t, s.Publish(context.Background(), ev), ErrSinkClosed)
	assert.Equal(t, 1, s.Len(), "Close keeps the events")
}

func TestMemorySinkConcurrent(t *testing.T) {
	s := NewMemorySink()
	const goroutines, per = 8, 200
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			ev := &events.Attempt{Attempt: g}
			for range per {
				assert.NoError(t, s.Publish(context.Background(), ev))
				_ = s.Len()
			}
		})
	}
	wg.Wait()
	counts := map[int]int{}
	for _, ev := range s.Events() {
		counts[ev.Attempt]++
	}
	for g := range goroutines {
		assert.Equal(t, per, counts[g])
	}
}

func TestSystemClock(t *testing.T) {
	c := SystemClock
	before := time.Now()
	assert.False(t, c.Now().Before(before))

	assert.NoError(t, c.Sleep(context.Background(), 0))
	assert.NoError(t, c.Sleep(context.Background(), -time.Second))
	assert.NoError(t, c.Sleep(context.Background(), time.Nanosecond))

	ctx, cancel := context.WithCancelCause(context.Background())
	cause := assert.AnError
	cancel(cause)
	// A canceled context returns at once even for a long wait.
	assert.ErrorIs(t, c.Sleep(ctx, time.Hour), cause)

	ctx2, cancel2 := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Sleep(ctx2, time.Hour) }()
	cancel2()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("Sleep did not end with its context")
	}
}

func TestLockedRand(t *testing.T) {
	a, b := LockedRand(7, 9), LockedRand(7, 9)
	for range 100 {
		x := a()
		require.Equal(t, x, b(), "same seed, same sequence")
		require.GreaterOrEqual(t, x, 0.0)
		require.Less(t, x, 1.0)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 1000 {
				_ = a()
			}
		})
	}
	wg.Wait()
}
