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
	// remaining is what the provider last said remains, before a
	// bucket started: the bucket starts from it rather than full.
	remaining [NumDims]tokenbucket.Bucket
	seen      [NumDims]bool
	// inferred is the requests limit inferred from 429s while no limit
	// is learned or configured.
	inferred Inferred
}

// limits are the limits in force at now: the learned ones, the
// configured ones over them, or else the inferred one.
func (l *limiter) limits(now time.Time, configured Limits) Limits {
	lim := l.learned.Over(configured)
	if !lim.Any() {
		lim[Requests] = l.inferred.Limit(now)
	}
	return lim
}

// rateLimited takes in a 429 at now whose hint (0: none) is hint: the
// provider had less than the attempt's cost, so every bucket is empty as
// of now (the calls a hold releases are spread over the refill, not sent
// at once), and, with no limit learned or configured, the inferred limit
// is lowered.
func (l *limiter) rateLimited(now time.Time, hint time.Duration, configured Limits) {
	if !l.learned.Over(configured).Any() {
		l.inferred = l.inferred.Lower(now, hint)
	}
	for d := range NumDims {
		if l.started[d] {
			l.buckets[d] = tokenbucket.Bucket{Level: min(l.buckets[d].Level, 0), At: now}
		} else {
			l.remaining[d], l.seen[d] = tokenbucket.Bucket{At: now}, true
		}
	}
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
			l.buckets[d], l.started[d] = Start(bl, now, l.remaining[d], l.seen[d]), true
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
func (l *limiter) observe(o *Observed, now time.Time) {
	for d := range NumDims {
		if o.Limit[d] > 0 {
			l.learned[d] = o.Limit[d]
		}
		if !o.HasRemaining[d] {
			continue
		}
		r := float64(o.Remaining[d])
		switch {
		case !l.started[d]:
			l.remaining[d], l.seen[d] = tokenbucket.Bucket{Level: r, At: now}, true
		case r < l.buckets[d].Level:
			l.buckets[d].Level = r
		}
	}
}

// Start is the bucket of a limit that starts being kept at now: what the
// provider said remained (refilled since), when it said so, else full.
func Start(l tokenbucket.Limit, now time.Time, remaining tokenbucket.Bucket, seen bool) tokenbucket.Bucket {
	if !seen {
		return tokenbucket.Full(l, now)
	}
	b := remaining.Refilled(l, now)
	b.At = now
	return b
}

// holdUntil holds the upstream until t, unless it is held longer already.
func (l *limiter) holdUntil(t time.Time, why string) {
	if t.After(l.hold) {
		l.hold, l.holdWhy = t, why
	}
}
