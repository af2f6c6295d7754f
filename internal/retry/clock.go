package retry

import (
	"context"
	"time"
)

// Clock is the middleware's source of time: the timestamps of the attempt
// events, the timestamps of generated ULIDs, the deadline check, the
// cooldown of the middleware's own breakers, and the waits between
// attempts. Inject a fake one in tests; SystemClock is the real one.
// Implementations must be safe for concurrent use.
//
// The wall clock (Now) may jump in either direction (an NTP step, an
// operator setting the time); the monotonic clock (Monotonic) may not. A
// call reads the wall clock once, when it begins; every later time of the
// call is that reading plus the monotonic time elapsed since. So an event's
// finished_at is never before its started_at, and no event of a call
// starts before the previous one finished, whatever the wall clock does
// meanwhile.
//
// Context deadlines are compared with those times (a wait that would end at
// or after the caller's deadline ends the call instead), so a fake clock
// used with deadlines should start at the real time, as deadlines are real.
type Clock interface {
	// Now returns the current wall-clock time.
	Now() time.Time
	// Monotonic returns a reading of a monotonic clock: the time since an
	// arbitrary fixed origin, unaffected by changes of the wall clock. Only
	// differences of readings mean anything. A reading below an earlier one
	// (a broken clock) is taken as no time passing.
	Monotonic() time.Duration
	// Sleep waits for d, or until ctx is done, whichever comes first. It
	// returns nil after a complete wait and context.Cause(ctx) when ctx
	// ended first. A non-positive d returns at once.
	Sleep(ctx context.Context, d time.Duration) error
}

// SystemClock is the Clock of package time.
var SystemClock Clock = systemClock{}

type systemClock struct{}

// monoOrigin is the origin of SystemClock's monotonic readings; time.Since
// measures from it on the monotonic clock that time.Now records.
var monoOrigin = time.Now()

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) Monotonic() time.Duration { return time.Since(monoOrigin) }

func (systemClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// timeline is the time of one call: its wall-clock start plus the
// monotonic time elapsed since, never going back. It is not safe for
// concurrent use (a call runs on one goroutine).
type timeline struct {
	clock   Clock
	start   time.Time     // the wall clock when the call began
	mono0   time.Duration // the monotonic reading then
	elapsed time.Duration // the largest elapsed time returned so far
}

// begin starts the timeline at the clock's present and returns its start.
func (tl *timeline) begin(c Clock) time.Time {
	tl.clock, tl.start, tl.mono0, tl.elapsed = c, c.Now(), c.Monotonic(), 0
	return tl.start
}

// now returns the call's present time.
func (tl *timeline) now() time.Time {
	if d := tl.clock.Monotonic() - tl.mono0; d > tl.elapsed {
		tl.elapsed = d
	}
	return tl.start.Add(tl.elapsed)
}

// GuardClock is the clock to give a guard.Set (guard.Config.Now) used with
// a Middleware on c: c's wall time when GuardClock is called, plus the
// monotonic time elapsed since, so that a stepped wall clock does not
// shorten or stretch a cooldown, a hold or a budget's window.
func GuardClock(c Clock) func() time.Time { return monotonicNow(c) }

// monotonicNow returns a clock function for a breaker that runs on c's
// monotonic clock: its times are c's wall time at the call to monotonicNow
// plus the monotonic time elapsed since. It is safe for concurrent use.
func monotonicNow(c Clock) func() time.Time {
	start, mono0 := c.Now(), c.Monotonic()
	return func() time.Time { return start.Add(c.Monotonic() - mono0) }
}
