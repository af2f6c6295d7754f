package emit

import "time"

// Clock is the publisher's source of time: when a publish was sent, when
// its ack is overdue, and when a failed event is due for its retry. Inject
// a fake one in tests; SystemClock is the real one. Implementations must be
// safe for concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a stopped Timer.
	NewTimer() Timer
}

// Timer is a one-shot timer owned by a single goroutine, with the semantics
// of time.Timer since Go 1.23: after Reset or Stop returns, no value from
// an earlier expiry is received from C.
type Timer interface {
	// C delivers the time when the timer expires.
	C() <-chan time.Time
	// Reset (re)arms the timer to expire after d.
	Reset(d time.Duration)
	// Stop disarms the timer.
	Stop()
}

// SystemClock is the Clock of package time.
var SystemClock Clock = systemClock{}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer() Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return sysTimer{t}
}

type sysTimer struct{ t *time.Timer }

func (s sysTimer) C() <-chan time.Time   { return s.t.C }
func (s sysTimer) Reset(d time.Duration) { s.t.Reset(d) }
func (s sysTimer) Stop()                 { s.t.Stop() }
