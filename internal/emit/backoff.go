package emit

import (
	"math"
	"time"
)

// Backoff is the wait before the retry of an event whose publish failed
// for the n-th time (n >= 1):
//
//	d = min(base * 2^(n-1), max),  wait = d/2 + r*d/2
//
// so the wait lies in [d/2, d): r = 0 gives the low end, r close to 1 the
// high end. r is the random value, normally uniform in [0, 1); it is an
// argument so that the function is pure. r out of range is clamped (NaN
// counts as 0), n < 1 counts as 1, a huge n saturates at max instead of
// overflowing, and max < base counts as base. The result is never
// negative.
func Backoff(n int, base, max time.Duration, r float64) time.Duration {
	if base <= 0 {
		return 0
	}
	if max < base {
		max = base
	}
	if n < 1 {
		n = 1
	}
	switch {
	case !(r >= 0): // also NaN
		r = 0
	case r >= 1:
		r = math.Nextafter(1, 0)
	}
	d := max
	if n-1 < 63 && base <= max>>(n-1) {
		d = base << (n - 1)
	}
	half := d / 2
	return half + time.Duration(r*float64(d-half))
}
