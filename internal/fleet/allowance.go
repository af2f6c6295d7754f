package fleet

import (
	"slices"
	"time"

	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/tokenbucket"
)

// allowance is the capacity this process took from the fleet's buckets
// and has not spent yet, in lots: each chunk taken, and each part of a
// reservation given back, lapses by its own age, one burst window after
// it was taken from the fleet (the provider's bucket would not have kept
// it longer), whatever was taken since. What was spent beyond the lots
// is a debt, paid from the next grants; it never lapses.
type allowance struct {
	lots []lot // by expiry, soonest first
	debt guard.Cost
	// demand is this process's recent rate of attempts per second, which
	// sizes the chunks it takes.
	demand     float64
	lastChunk  time.Time
	sinceChunk float64
}

// lot is capacity that lapses at expires.
type lot struct {
	have    guard.Cost
	expires time.Time
}

// lapse drops the lots that expired by now.
func (a *allowance) lapse(now time.Time) {
	i := 0
	for i < len(a.lots) && !now.Before(a.lots[i].expires) {
		i++
	}
	a.lots = a.lots[i:]
}

// available is what the allowance holds of dimension d, debts paid.
func (a *allowance) available(d guard.Dim) float64 {
	v := -a.debt[d]
	for _, l := range a.lots {
		v += l.have[d]
	}
	return v
}

// covers reports whether the allowance holds cost in every limited
// dimension.
func (a *allowance) covers(lim guard.Limits, cost guard.Cost) bool {
	for d := range guard.NumDims {
		if lim[d] > 0 && a.available(d) < cost[d] {
			return false
		}
	}
	return true
}

// take spends the cost of an attempt.
func (a *allowance) take(cost guard.Cost) {
	a.spend(cost)
	a.sinceChunk++
}

// spend takes c from the lots, soonest to lapse first; what they do not
// hold becomes a debt.
func (a *allowance) spend(c guard.Cost) {
	for d := range guard.NumDims {
		left := c[d]
		for i := range a.lots {
			if left <= 0 {
				break
			}
			t := min(left, a.lots[i].have[d])
			a.lots[i].have[d] -= t
			left -= t
		}
		a.debt[d] += max(left, 0)
	}
}

// add puts c in the allowance until expires, debts paid first.
func (a *allowance) add(c guard.Cost, expires time.Time) {
	some := false
	for d := range guard.NumDims {
		p := min(max(c[d], 0), a.debt[d])
		a.debt[d] -= p
		c[d] = max(c[d]-p, 0)
		some = some || c[d] > 0
	}
	if !some {
		return
	}
	i, _ := slices.BinarySearchFunc(a.lots, expires, func(l lot, t time.Time) int { return l.expires.Compare(t) })
	a.lots = slices.Insert(a.lots, i, lot{have: c, expires: expires})
}

// chunk is what the process asks for beyond its need: a quarter second of
// its recent demand, at most its share of a full bucket.
func (a *allowance) chunk(lim guard.Limits, cost guard.Cost, burst time.Duration, processes int, now time.Time) guard.Cost {
	if !a.lastChunk.IsZero() {
		// A burst at one instant counts as 10 ms: the rate is high, and
		// the share caps the chunk anyway.
		d := max(now.Sub(a.lastChunk), 10*time.Millisecond).Seconds()
		a.demand = 0.5*a.demand + 0.5*a.sinceChunk/d
	}
	a.lastChunk, a.sinceChunk = now, 0
	var c guard.Cost
	for d := range guard.NumDims {
		if lim[d] <= 0 {
			continue
		}
		share := tokenbucket.Limit{PerMinute: float64(lim[d]), Burst: burst}.Capacity() / float64(max(1, processes))
		c[d] = min(a.demand*chunkWindow.Seconds()*cost[d], share)
	}
	return c
}
