package emit

import (
	"sync"
	"time"
)

// fakeClock is a Clock whose time moves only when the test calls Advance.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer() Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, ch: make(chan time.Time, 1)}
	c.timers = append(c.timers, t)
	return t
}

// Advance moves time forward by d and fires every timer that is due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for _, t := range c.timers {
		if t.armed && !t.when.After(c.now) {
			t.fireLocked()
		}
	}
}

type fakeTimer struct {
	c     *fakeClock
	ch    chan time.Time
	when  time.Time
	armed bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Reset(d time.Duration) {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.drainLocked()
	t.when, t.armed = t.c.now.Add(d), true
	if d <= 0 {
		t.fireLocked()
	}
}

func (t *fakeTimer) Stop() {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.armed = false
	t.drainLocked()
}

func (t *fakeTimer) fireLocked() {
	t.armed = false
	select {
	case t.ch <- t.c.now:
	default:
	}
}

func (t *fakeTimer) drainLocked() {
	select {
	case <-t.ch:
	default:
	}
}
