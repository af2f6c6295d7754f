package guard

import "math"

// Estimate is the cost an attempt of one upstream reserves before it is
// made: an exponentially weighted mean of the actual costs of attempts,
// plus twice their weighted mean absolute deviation. Reserving more than
// the mean costs no throughput (what an attempt reserved beyond its
// actual cost is given back when it settles), and keeps the reserved
// capacity a lower bound of the provider's, so that a large call rarely
// meets a 429 that a mean would have let it in for. The zero Estimate
// knows nothing: its cost is one request and no tokens. Not safe for
// concurrent use.
type Estimate struct {
	mean, dev Cost
	n         int
}

// estimateWeight is the weight of the newest attempt in an Estimate.
const estimateWeight = 0.2

// Add takes the actual cost c of an attempt into the estimate.
func (e *Estimate) Add(c Cost) {
	if e.n == 0 {
		e.mean = c
	} else {
		for d := range NumDims {
			e.dev[d] += estimateWeight * (math.Abs(c[d]-e.mean[d]) - e.dev[d])
			e.mean[d] += estimateWeight * (c[d] - e.mean[d])
		}
	}
	e.n++
}

// Known reports whether any attempt was added.
func (e *Estimate) Known() bool { return e.n > 0 }

// Cost is the cost to reserve for the next attempt.
func (e *Estimate) Cost() Cost {
	if e.n == 0 {
		return Cost{Requests: 1}
	}
	var c Cost
	for d := range NumDims {
		c[d] = e.mean[d] + 2*e.dev[d]
	}
	return c
}
