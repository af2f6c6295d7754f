package testkit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClockMoves(t *testing.T) {
	tests := []struct {
		name     string
		move     func(c *Clock)
		wall     time.Duration // from Epoch
		mono     time.Duration // from the first reading
		readings int           // extra readings of Now before the check
	}{
		{"nothing", func(*Clock) {}, 0, 0, 0},
		{"advance", func(c *Clock) { c.Advance(3 * time.Second) }, 3 * time.Second, 3 * time.Second, 0},
		{"advance backwards is nothing", func(c *Clock) { c.Advance(-time.Second) }, 0, 0, 0},
		{"set forward", func(c *Clock) { c.Set(Epoch.Add(time.Minute)) }, time.Minute, 0, 0},
		{"set back", func(c *Clock) { c.Set(Epoch.Add(-time.Minute)) }, -time.Minute, 0, 0},
		{"step wall", func(c *Clock) { c.StepWall(-time.Hour) }, -time.Hour, 0, 0},
		{"step monotonic", func(c *Clock) { c.StepMonotonic(-time.Second) }, 0, -time.Second, 0},
		{"sleep", func(c *Clock) { require.NoError(t, c.Sleep(context.Background(), 2*time.Second)) }, 2 * time.Second, 2 * time.Second, 0},
		{"sleep of nothing", func(c *Clock) { require.NoError(t, c.Sleep(context.Background(), -time.Second)) }, 0, 0, 0},
		{"auto step", func(c *Clock) { c.AutoStep(time.Millisecond) }, 3 * time.Millisecond, 3 * time.Millisecond, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewClock()
			require.Equal(t, Epoch, c.Now())
			mono0 := c.Monotonic()
			tt.move(c)
			for range tt.readings {
				c.Now()
			}
			assert.Equal(t, Epoch.Add(tt.wall), c.Now())
			assert.Equal(t, tt.mono, c.Monotonic()-mono0)
		})
	}
}

func TestNewClockNow(t *testing.T) {
	before := time.Now().Truncate(time.Millisecond)
	c := NewClockNow()
	assert.False(t, c.Now().Before(before))
	assert.False(t, c.Now().After(time.Now()))
	assert.Zero(t, c.Now().Nanosecond()%int(time.Millisecond))
}

func TestClockSleeps(t *testing.T) {
	c := NewClockAt(time.Unix(0, 0))
	ctx := context.Background()
	require.NoError(t, c.Sleep(ctx, time.Second))
	require.NoError(t, c.Sleep(ctx, 0))
	cancelled, cancel := context.WithCancelCause(ctx)
	cause := errors.New("gone")
	cancel(cause)
	require.ErrorIs(t, c.Sleep(cancelled, time.Minute), cause)
	assert.Equal(t, []time.Duration{time.Second, 0}, c.Sleeps(), "a sleep on an ended context is not recorded")
	assert.Equal(t, time.Unix(1, 0), c.Now())
}

func TestClockHoldSleeps(t *testing.T) {
	c := NewClock()
	held := c.HoldSleeps()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Sleep(ctx, 5*time.Second) }()
	require.Equal(t, 5*time.Second, <-held)
	select {
	case err := <-done:
		t.Fatalf("a held sleep returned %v before its context ended", err)
	default:
	}
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	assert.Equal(t, Epoch, c.Now(), "a held sleep does not move the clock")
	assert.Equal(t, []time.Duration{5 * time.Second}, c.Sleeps())
}

func TestTimersFireInOrderOfDeadline(t *testing.T) {
	tests := []struct {
		name    string
		arm     []time.Duration // one timer each, in this order
		stop    []int           // timers stopped before the advance
		advance []time.Duration
		want    []int // the timers fired, in order
	}{
		{"none due", []time.Duration{time.Second}, nil, []time.Duration{time.Second - 1}, nil},
		{"exactly due", []time.Duration{time.Second}, nil, []time.Duration{time.Second}, []int{0}},
		{"in deadline order", []time.Duration{3 * time.Second, time.Second, 2 * time.Second}, nil, []time.Duration{time.Minute}, []int{1, 2, 0}},
		{"ties in arming order", []time.Duration{time.Second, time.Second}, nil, []time.Duration{time.Second}, []int{0, 1}},
		{"step by step", []time.Duration{2 * time.Second, time.Second}, nil, []time.Duration{time.Second, time.Second}, []int{1, 0}},
		{"stopped", []time.Duration{time.Second, time.Second}, []int{0}, []time.Duration{time.Second}, []int{1}},
		{"at once", []time.Duration{0}, nil, nil, []int{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewClock()
			var fired []int
			timers := make([]*Timer, len(tt.arm))
			for i, d := range tt.arm {
				timers[i] = c.AfterFunc(d, func() { fired = append(fired, i) })
			}
			for _, i := range tt.stop {
				timers[i].Stop()
			}
			for _, d := range tt.advance {
				c.Advance(d)
			}
			assert.Equal(t, tt.want, fired)
			assert.Equal(t, len(tt.arm)-len(tt.stop)-len(tt.want), c.Armed())
		})
	}
}

func TestTimerSendsItsDeadline(t *testing.T) {
	c := NewClock()
	late, early := c.NewTimer(), c.NewTimer()
	late.Reset(2 * time.Second)
	early.Reset(time.Second)
	c.Advance(time.Hour)
	assert.Equal(t, Epoch.Add(time.Second), <-early.C())
	assert.Equal(t, Epoch.Add(2*time.Second), <-late.C())
}

func TestAfterFuncMayUseTheClock(t *testing.T) {
	c := NewClock()
	var ran []time.Time
	var again func()
	again = func() {
		ran = append(ran, c.Now())
		if len(ran) < 3 {
			c.AfterFunc(time.Second, again)
		}
	}
	c.AfterFunc(time.Second, again)
	c.Advance(time.Second)
	c.Advance(time.Second)
	c.Advance(time.Second)
	assert.Equal(t, []time.Time{Epoch.Add(time.Second), Epoch.Add(2 * time.Second), Epoch.Add(3 * time.Second)}, ran)
}

func TestTimerResetDropsAnEarlierExpiry(t *testing.T) {
	c := NewClock()
	tm := c.NewTimer()
	tm.Reset(time.Second)
	c.Advance(time.Second) // fires, nobody receives
	tm.Reset(time.Second)
	select {
	case <-tm.C():
		t.Fatal("a value from before Reset was received")
	default:
	}
	c.Advance(time.Second)
	assert.Equal(t, Epoch.Add(2*time.Second), <-tm.C())
	assert.Equal(t, Epoch.Add(3*time.Second), func() time.Time { ch := c.After(time.Second); c.Advance(time.Second); return <-ch }())
}

func TestSleepFiresTimers(t *testing.T) {
	c := NewClock()
	ch := c.After(time.Second)
	require.NoError(t, c.Sleep(context.Background(), time.Second))
	assert.Equal(t, Epoch.Add(time.Second), <-ch)
}

func TestClockIsSafeForConcurrentUse(t *testing.T) {
	c := NewClock()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				c.Advance(time.Millisecond)
				c.Now()
				tm := c.NewTimer()
				tm.Reset(time.Millisecond)
				tm.Stop()
				_ = c.Sleep(context.Background(), time.Millisecond)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, Epoch.Add(800*time.Millisecond), c.Now())
	assert.Zero(t, c.Armed())
}

func TestRealClock(t *testing.T) {
	c := NewRealClock()
	before := time.Now()
	now := c.Now()
	assert.False(t, now.Before(before), "a real clock follows real time")
	c.Advance(time.Hour)
	assert.False(t, c.Now().Before(before.Add(time.Hour)), "Advance moves it ahead")

	c.Freeze()
	frozen := c.Now()
	require.True(t, c.Frozen())
	// Real time goes on; the frozen clock does not, until it is advanced.
	for time.Now().Equal(before) {
	}
	assert.Equal(t, frozen, c.Now())
	c.Advance(time.Second)
	assert.Equal(t, frozen.Add(time.Second), c.Now())

	c.Thaw()
	assert.False(t, c.Frozen())
	got := c.Now()
	assert.False(t, got.Before(frozen.Add(time.Second)), "it restarts where it stopped")
	assert.Less(t, got.Sub(frozen.Add(time.Second)), time.Minute, "the pause is lost from its time")
}
