package guard

import (
	"math"
	"time"
)

// Inferred is the provisional requests limit of an upstream whose
// responses say no limit (Gemini sends no rate-limit headers) and for
// which none is configured, inferred from its 429s:
//
//   - each 429 with a hint lowers it: the hint is how long the provider's
//     bucket takes to hold one more attempt of this cost, so attempts fit
//     at most one per hint (60 s / hint a minute), and the fleet keeps
//     InferMargin below that;
//   - while no 429 comes it rises slowly, by InferRaise of its base a
//     second, to at most InferCeiling times it, and the next 429 lowers it
//     again.
//
// The zero value is no limit inferred yet.
type Inferred struct {
	// Base is the limit, requests per minute, when it was set at At.
	Base float64   `json:"requests_per_minute"`
	At   time.Time `json:"at"`
}

// The shape of an inferred limit.
const (
	InferMargin  = 0.9
	InferRaise   = 0.01
	InferCeiling = 1.5
	// InferQuiet is how long after one lowering the next lowers by the
	// margin alone: the 429s of one excess (the attempts in flight when
	// it was met) come within it.
	InferQuiet = 100 * time.Millisecond
)

// Known reports whether a limit was inferred.
func (i Inferred) Known() bool { return i.Base > 0 }

// Limit is the limit in force at now, in requests per minute (0 when none
// is known).
func (i Inferred) Limit(now time.Time) int64 {
	if !i.Known() {
		return 0
	}
	up := 1.0
	if d := now.Sub(i.At); d > 0 {
		up = min(InferCeiling, 1+InferRaise*d.Seconds())
	}
	return max(1, int64(math.Round(i.Base*up)))
}

// Lower returns the limit after a 429 at now whose hint is hint: the
// lower of the limit in force and InferMargin of one attempt per hint;
// when the hint says no less, InferMargin of the limit in force, at most
// once per InferQuiet (the 429s of one excess come together; they lower
// it once).
// Without a hint, and no limit yet, there is nothing to go by.
func (i Inferred) Lower(now time.Time, hint time.Duration) Inferred {
	if !i.Known() {
		if hint <= 0 {
			return i
		}
		return Inferred{Base: max(1, InferMargin*float64(time.Minute)/float64(hint)), At: now}
	}
	cur := float64(i.Limit(now))
	if hint > 0 {
		if byHint := InferMargin * float64(time.Minute) / float64(hint); byHint < cur {
			return Inferred{Base: max(1, byHint), At: now}
		}
	}
	if now.Sub(i.At) < InferQuiet {
		return Inferred{Base: cur, At: now}
	}
	return Inferred{Base: max(1, cur*InferMargin), At: now}
}

// Below reports whether i says less than o at now (a limit unknown says
// more than any).
func (i Inferred) Below(o Inferred, now time.Time) bool {
	return i.Known() && (!o.Known() || i.Limit(now) < o.Limit(now))
}
