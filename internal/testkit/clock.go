package testkit

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Epoch is where NewClock starts: a fixed instant, so that times in test
// failures read the same on every run.
var Epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// monoStart is the first monotonic reading of a Clock: positive, so that a
// reading of zero (often a "never" in code under test) is never seen.
const monoStart = time.Hour

// Clock is a fake clock, safe for concurrent use. It keeps a wall time
// (Now) and a monotonic reading (Monotonic); Advance moves both, StepWall
// and Set the wall time alone (an NTP step), StepMonotonic the reading
// alone (a broken clock). Timers fire when Advance, Set, StepWall, Sleep
// or an AutoStep bring the wall time to their deadline, in the order of
// their deadlines (then of their arming); a timer's channel receives its
// deadline.
//
// A Clock from NewRealClock follows real time instead; see there.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	mono   time.Duration
	step   time.Duration // AutoStep: added before every reading of Now
	sleeps []time.Duration
	hold   chan time.Duration // HoldSleeps: where Sleep announces its wait
	timers []*Timer           // armed, in no particular order
	seq    uint64             // arming order, to break ties of deadline

	real     bool          // NewRealClock
	origin   time.Time     // real: the wall time at creation
	offset   time.Duration // real: added to time.Now
	frozen   bool          // real: Now is frozenAt
	frozenAt time.Time
}

// NewClock returns a Clock at Epoch.
func NewClock() *Clock { return NewClockAt(Epoch) }

// NewClockAt returns a Clock at t.
func NewClockAt(t time.Time) *Clock { return &Clock{now: t, mono: monoStart} }

// NewClockNow returns a Clock at the real time, to the millisecond: for
// code that compares the clock's times with context deadlines, which are
// real (retry's middleware does).
func NewClockNow() *Clock { return NewClockAt(time.Now().Truncate(time.Millisecond)) }

// NewRealClock returns a Clock that follows real time: Now is time.Now plus
// an offset, which Advance moves. Freeze stops it (the clock of a paused
// process) and Thaw restarts it from where it stopped, so the pause is
// lost from its time. Its timers and Sleep still wait for Advance, not for
// real time; it is meant for code that only reads the time.
func NewRealClock() *Clock { return &Clock{real: true, origin: time.Now(), mono: monoStart} }

// Now returns the wall time, first moving it by the AutoStep if one is set.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	var fns []func()
	if c.step > 0 {
		fns = c.moveLocked(c.step, c.step)
	}
	now := c.wallLocked()
	c.mu.Unlock()
	run(fns)
	return now
}

// Monotonic returns the monotonic reading: a duration since an arbitrary
// origin, which Advance and Sleep move, StepMonotonic alone, and StepWall
// and Set do not. A real Clock's readings follow its wall time instead
// (time passing, Advance, the steps), and StepMonotonic does not move them.
func (c *Clock) Monotonic() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.real {
		return monoStart + c.wallLocked().Sub(c.origin)
	}
	return c.mono
}

// Advance moves the wall time and the monotonic reading forward by d
// (nothing if d is not positive) and fires the timers that fall due.
func (c *Clock) Advance(d time.Duration) {
	if d <= 0 {
		return
	}
	c.mu.Lock()
	fns := c.moveLocked(d, d)
	c.mu.Unlock()
	run(fns)
}

// Set moves the wall time to t, forward or back, leaving the monotonic
// reading, and fires the timers that fall due.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	fns := c.moveLocked(t.Sub(c.wallLocked()), 0)
	c.mu.Unlock()
	run(fns)
}

// StepWall moves the wall time alone by d, which may be negative: a step of
// the system clock. Timers that fall due fire.
func (c *Clock) StepWall(d time.Duration) {
	c.mu.Lock()
	fns := c.moveLocked(d, 0)
	c.mu.Unlock()
	run(fns)
}

// StepMonotonic moves the monotonic reading alone by d, which may be
// negative: a broken monotonic clock.
func (c *Clock) StepMonotonic(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mono += d
}

// AutoStep makes every later reading of Now move the clock by d first (0
// stops it), so that concurrent callers see time pass without a test
// driving it.
func (c *Clock) AutoStep(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.step = max(d, 0)
}

// Freeze stops a real Clock at its present time; Advance still moves it.
// On a fake Clock, whose time moves only when told, it does nothing.
func (c *Clock) Freeze() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.real && !c.frozen {
		c.frozenAt, c.frozen = c.wallLocked(), true
	}
}

// Thaw restarts a frozen real Clock from the time where it stopped.
func (c *Clock) Thaw() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.real && c.frozen {
		c.frozen = false
		c.offset = time.Until(c.frozenAt)
	}
}

// Frozen reports whether the Clock is frozen.
func (c *Clock) Frozen() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.frozen
}

// Sleep waits for d on the Clock, or until ctx ends. It returns
// context.Cause(ctx) at once if ctx has ended. Otherwise it records d
// (Sleeps) and, by default, moves the clock by d (if positive, firing the
// timers that fall due) and returns nil: the wait passes without real
// waiting. After HoldSleeps, it announces d instead and blocks until ctx
// ends. It has the signature of retry.Clock's Sleep.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	hold := c.hold
	var fns []func()
	if hold == nil && d > 0 {
		fns = c.moveLocked(d, d)
	}
	c.mu.Unlock()
	if hold == nil {
		run(fns)
		return nil
	}
	select {
	case hold <- d:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	<-ctx.Done()
	return context.Cause(ctx)
}

// Sleeps returns the waits of every Sleep so far, in order.
func (c *Clock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.sleeps)
}

// HoldSleeps makes every later Sleep announce its wait on the returned
// channel (buffered for one) and then block until its context ends, so that
// a test can act while code is waiting.
func (c *Clock) HoldSleeps() <-chan time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hold = make(chan time.Duration, 1)
	return c.hold
}

// wallLocked is the wall time.
func (c *Clock) wallLocked() time.Time {
	if !c.real {
		return c.now
	}
	if c.frozen {
		return c.frozenAt
	}
	return time.Now().Add(c.offset)
}

// moveLocked moves the wall time by wall and the monotonic reading by
// mono, firing the timers that fall due on the way, in order, and returns
// the functions of the AfterFunc timers among them, for the caller to run
// in that order once it has let go of the lock.
func (c *Clock) moveLocked(wall, mono time.Duration) (fns []func()) {
	c.mono += mono
	if c.real {
		c.offset += wall
		if c.frozen {
			c.frozenAt = c.frozenAt.Add(wall)
		}
	} else {
		c.now = c.now.Add(wall)
	}
	now := c.wallLocked()
	for {
		t := c.nextDueLocked(now)
		if t == nil {
			return fns
		}
		if fn := t.fireLocked(); fn != nil {
			fns = append(fns, fn)
		}
	}
}

// run runs fns in order.
func run(fns []func()) {
	for _, fn := range fns {
		fn()
	}
}

// nextDueLocked returns the armed timer with the earliest deadline at or
// before now, or nil.
func (c *Clock) nextDueLocked(now time.Time) *Timer {
	var next *Timer
	for _, t := range c.timers {
		if t.when.After(now) {
			continue
		}
		if next == nil || t.when.Before(next.when) || t.when.Equal(next.when) && t.seq < next.seq {
			next = t
		}
	}
	return next
}

// Armed returns how many timers are armed: a test can wait until the code
// under test has armed its timer before it advances the clock.
func (c *Clock) Armed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// Timer is a timer of a Clock, with the semantics of time.Timer since Go
// 1.23: after Reset or Stop returns, no value from an earlier expiry is
// received from C. Its methods are those of emit.Timer.
type Timer struct {
	c     *Clock
	ch    chan time.Time
	fn    func() // AfterFunc: run by the mover of the clock instead of sending
	when  time.Time
	seq   uint64
	armed bool
}

// NewTimer returns a stopped Timer; Reset arms it.
func (c *Clock) NewTimer() *Timer {
	return &Timer{c: c, ch: make(chan time.Time, 1)}
}

// After returns a channel that receives the time once the clock has moved
// by d.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	t := c.NewTimer()
	t.Reset(d)
	return t.ch
}

// AfterFunc runs f once the clock has moved by d. Unlike time.AfterFunc,
// f runs on the goroutine that moved the clock, before that call returns,
// and the functions of timers that fire together run in the order of their
// deadlines: deterministic. f may use the clock. Stop cancels it.
func (c *Clock) AfterFunc(d time.Duration, f func()) *Timer {
	t := &Timer{c: c, fn: f}
	t.Reset(d)
	return t
}

// C delivers the deadline of the timer when it fires. It is nil for a
// Timer from AfterFunc.
func (t *Timer) C() <-chan time.Time { return t.ch }

// Reset (re)arms the timer to fire once the clock has moved by d; a d that
// is not positive fires it at once.
func (t *Timer) Reset(d time.Duration) {
	c := t.c
	c.mu.Lock()
	t.stopLocked()
	c.seq++
	t.when, t.seq, t.armed = c.wallLocked().Add(d), c.seq, true
	c.timers = append(c.timers, t)
	var fn func()
	if d <= 0 {
		fn = t.fireLocked()
	}
	c.mu.Unlock()
	if fn != nil {
		fn()
	}
}

// Stop disarms the timer, and drains a value it sent and nobody received.
func (t *Timer) Stop() {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.stopLocked()
}

func (t *Timer) stopLocked() {
	if t.armed {
		t.armed = false
		t.c.timers = slices.DeleteFunc(t.c.timers, func(o *Timer) bool { return o == t })
	}
	if t.ch != nil {
		select {
		case <-t.ch:
		default:
		}
	}
}

// fireLocked disarms an armed timer and sends its deadline, or returns its
// function for the caller to run once it has let go of the lock.
func (t *Timer) fireLocked() func() {
	t.armed = false
	t.c.timers = slices.DeleteFunc(t.c.timers, func(o *Timer) bool { return o == t })
	if t.fn != nil {
		return t.fn
	}
	select {
	case t.ch <- t.when:
	default:
	}
	return nil
}
