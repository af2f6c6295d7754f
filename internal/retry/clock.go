package retry

import (
	"context"
	"time"
)

// Clock is the middleware's source of time: the timestamps of the attempt
// events, the timestamps of generated ULIDs, the deadline check, and the
// waits between attempts. Inject a fake one in tests; SystemClock is the
// real one. Implementations must be safe for concurrent use.
//
// Context deadlines are compared with Now (a wait that would end at or
// after the caller's deadline ends the call instead), so a fake clock used
// with deadlines should start at the real time, as deadlines are real.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Sleep waits for d, or until ctx is done, whichever comes first. It
	// returns nil after a complete wait and context.Cause(ctx) when ctx
	// ended first. A non-positive d returns at once.
	Sleep(ctx context.Context, d time.Duration) error
}

// SystemClock is the Clock of package time.
var SystemClock Clock = systemClock{}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

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
