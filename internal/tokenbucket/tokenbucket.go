package tokenbucket

import (
	"math"
	"time"
)

// DefaultBurst is the burst window of a limit: how much of a minute's
// capacity a full bucket holds. Providers enforce their per-minute limits
// over shorter intervals (Anthropic: "60 RPM may be enforced as 1 request
// per second"), so a bucket holds one second of the limit by default.
const DefaultBurst = time.Second

// Limit is a rate limit: PerMinute units per minute, of which a full
// bucket holds Burst's worth. PerMinute 0 means no limit.
type Limit struct {
	PerMinute float64
	Burst     time.Duration
}

// Capacity is the level of a full bucket: PerMinute * Burst / 1 min, at
// least one unit (a limit under one unit per burst still admits a request
// when the bucket is full).
func (l Limit) Capacity() float64 {
	b := l.Burst
	if b <= 0 {
		b = DefaultBurst
	}
	return max(1, l.PerMinute*b.Seconds()/60)
}

// perSecond is the refill rate.
func (l Limit) perSecond() float64 { return l.PerMinute / 60 }

// Bucket is the state of one limit: its level at time At.
type Bucket struct {
	Level float64
	At    time.Time
}

// Full returns a full bucket at now.
func Full(l Limit, now time.Time) Bucket { return Bucket{Level: l.Capacity(), At: now} }

// Refilled returns b brought forward to now: refilled for the time passed,
// capped at the capacity. A now before b.At (a clock that went back, or
// another process's clock ahead of ours) refills nothing.
func (b Bucket) Refilled(l Limit, now time.Time) Bucket {
	if d := now.Sub(b.At); d > 0 {
		b.Level = min(l.Capacity(), b.Level+d.Seconds()*l.perSecond())
		b.At = now
	}
	if b.Level > l.Capacity() { // the limit went down since
		b.Level = l.Capacity()
	}
	return b
}

// Fits reports whether cost fits the bucket at its level: the level is at
// least min(cost, capacity).
func (b Bucket) Fits(l Limit, cost float64) bool {
	return b.Level >= min(cost, l.Capacity())
}

// Wait is how long after b.At the bucket fits cost, refilling at the
// limit's rate: 0 when it fits already.
func (b Bucket) Wait(l Limit, cost float64) time.Duration {
	need := min(cost, l.Capacity()) - b.Level
	if need <= 0 {
		return 0
	}
	if l.perSecond() <= 0 {
		return math.MaxInt64
	}
	secs := need / l.perSecond()
	if secs >= math.MaxInt64/float64(time.Second) {
		return math.MaxInt64
	}
	// Rounded up to the microsecond, so that the bucket fits when the wait
	// is over rather than a hair before.
	return (time.Duration(secs*float64(time.Second)) + time.Microsecond).Truncate(time.Microsecond)
}

// UntilFull is how long after b.At the bucket is full again.
func (b Bucket) UntilFull(l Limit) time.Duration {
	return b.Wait(l, l.Capacity())
}
