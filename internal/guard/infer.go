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
//   - a 429 whose hint says no less than the limit in force lowers it by
//     InferMargin, at most once per InferQuiet, but only when the hint is
//     at least half the interval of one request at that limit: a 429 whose
//     hint is far shorter (the provider's bucket holds one more attempt
//     long before the next is due at this rate) says the provider refused
//     for another reason (a transient overload, a fault), not that the
//     fleet is at its rate, and repeated, such 429s would ratchet the
//     limit down without end;
//   - while no 429 comes it rises slowly, by InferRaise of its base a
//     second, to at most InferCeiling times it, and the next 429 lowers it
//     again;
//   - InferForget after its last lowering it is forgotten: the fleet runs
//     unlimited again until the next 429 says otherwise, so a limit
//     inferred from one burst does not hold a later run (the fleet keeps
//     its records for an hour).
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
	// InferForget is how long an inferred limit lasts after its last
	// lowering.
	InferForget = time.Minute
)

// Known reports whether a limit was inferred (it may since have been
// forgotten: Live).
func (i Inferred) Known() bool { return i.Base > 0 }

// Live reports whether the inferred limit is in force at now: known, and
// lowered less than InferForget before.
func (i Inferred) Live(now time.Time) bool { return i.Known() && now.Sub(i.At) < InferForget }

// Limit is the limit in force at now, in requests per minute (0 when none
// is, or it was forgotten).
func (i Inferred) Limit(now time.Time) int64 {
	if !i.Live(now) {
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
	if !i.Live(now) {
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
		if interval := float64(time.Minute) / cur; float64(hint) < interval/2 {
			return i // not a sign of the fleet's rate (see Inferred)
		}
	}
	if now.Sub(i.At) < InferQuiet {
		return Inferred{Base: cur, At: now}
	}
	return Inferred{Base: max(1, cur*InferMargin), At: now}
}

// Below reports whether i says less than o at now (a limit unknown or
// forgotten says more than any).
func (i Inferred) Below(o Inferred, now time.Time) bool {
	return i.Live(now) && (!o.Live(now) || i.Limit(now) < o.Limit(now))
}
