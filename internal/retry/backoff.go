package retry

import (
	"math"
	"time"
)

// Delay is the wait before retry number retry (0 for the wait after the
// first attempt) when the server gave no hint:
//
//	min(BaseDelay * 2^retry * (1 + u), MaxDelay),  u = Jitter * (2r - 1)
//
// so r = 0 gives the low end of the jitter band, r close to 1 the high end
// and r = 0.5 the unjittered value. r is the random value, normally uniform
// in [0, 1); it is an argument so that the function is pure. Values out of
// range are clamped (NaN counts as 0), a negative retry counts as 0, and a
// huge retry saturates at MaxDelay instead of overflowing. A non-positive
// MaxDelay means no cap. The result is never negative.
func Delay(p Policy, retry int, r float64) time.Duration {
	if p.BaseDelay <= 0 {
		return 0
	}
	if retry < 0 {
		retry = 0
	}
	switch {
	case !(r >= 0): // also NaN
		r = 0
	case r >= 1:
		r = math.Nextafter(1, 0)
	}
	jitter := p.Jitter
	switch {
	case !(jitter >= 0):
		jitter = 0
	case jitter > 1:
		jitter = 1
	}
	limit := time.Duration(math.MaxInt64)
	if p.MaxDelay > 0 {
		limit = p.MaxDelay
	}
	mult := 1 + jitter*(2*r-1) // in [0, 2)
	// Ldexp saturates at +Inf for a huge retry; mult = 0 gives 0, not NaN.
	d := math.Ldexp(float64(p.BaseDelay)*mult, min(retry, 2048))
	if d >= float64(limit) {
		return limit
	}
	return time.Duration(d)
}
