package guard

import (
	"time"

	"github.com/agentledger/ledger/internal/tokenbucket"
)

// limiter is the local rate limiter of one upstream: a token bucket per
// dimension with a known limit, and the hold after a 429. Not safe for
// concurrent use (the Guard's mutex guards it).
type limiter struct {
	learned Limits
	buckets [NumDims]tokenbucket.Bucket
	started [NumDims]bool
	hold    time.Time // no attempt before it
	holdWhy string
}

// bucketLimit is the limit of dimension d: l's, divided by share.
func bucketLimit(l Limits, d Dim, share int, burst time.Duration) tokenbucket.Limit {
	return tokenbucket.Limit{PerMinute: float64(l[d]) / float64(max(1, share)), Burst: burst}
}

// reserve takes cost at now under limits lim (each divided by share), or
// returns how long until the whole cost fits and the dimension it waits
// for. A hold comes first. It takes nothing unless every dimension fits.
func (l *limiter) reserve(now time.Time, lim Limits, share int, burst time.Duration, cost Cost) (time.Duration, Dim, bool) {
	if now.Before(l.hold) {
		return l.hold.Sub(now), 0, true
	}
	var (
		wait    time.Duration
		waitDim Dim
	)
	for d := range NumDims {
		if lim[d] <= 0 {
			continue
		}
		bl := bucketLimit(lim, d, share, burst)
		if !l.started[d] {
			l.buckets[d], l.started[d] = tokenbucket.Full(bl, now), true
		}
		l.buckets[d] = l.buckets[d].Refilled(bl, now)
		if w := l.buckets[d].Wait(bl, cost[d]); w > wait {
			wait, waitDim = w, d
		}
	}
	if wait > 0 {
		return wait, waitDim, false
	}
	for d := range NumDims {
		if lim[d] > 0 {
			l.buckets[d].Level -= cost[d]
		}
	}
	return 0, 0, false
}

// adjust gives back what the attempt reserved beyond what it used (or
// takes what it used beyond), in the dimensions that have a bucket.
func (l *limiter) adjust(reserved, actual Cost) {
	for d := range NumDims {
		if l.started[d] {
			l.buckets[d].Level += reserved[d] - actual[d]
		}
	}
}

// observe learns the limits the headers say and lowers each bucket to what
// the provider says remains, when that is less.
func (l *limiter) observe(o *Observed) {
	for d := range NumDims {
		if o.Limit[d] > 0 {
			l.learned[d] = o.Limit[d]
		}
		if o.HasRemaining[d] && l.started[d] && float64(o.Remaining[d]) < l.buckets[d].Level {
			l.buckets[d].Level = float64(o.Remaining[d])
		}
	}
}

// holdUntil holds the upstream until t, unless it is held longer already.
func (l *limiter) holdUntil(t time.Time, why string) {
	if t.After(l.hold) {
		l.hold, l.holdWhy = t, why
	}
}
