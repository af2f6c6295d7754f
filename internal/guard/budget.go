package guard

import "time"

// BudgetSlots is the number of slots of a budget's sliding window: a
// window of one minute counts in slots of five seconds.
const BudgetSlots = 12

// window counts first attempts and retries over a sliding window of
// BudgetSlots slots. Not safe for concurrent use.
type window struct {
	slot    time.Duration
	number  [BudgetSlots]int64 // the slot number each position holds
	first   [BudgetSlots]int64
	retries [BudgetSlots]int64
}

func newWindow(w time.Duration) window { return window{slot: max(w/BudgetSlots, time.Millisecond)} }

// position returns the position of now's slot, emptied if it held an
// older slot.
func (w *window) position(now time.Time) int {
	n := now.UnixNano() / int64(w.slot)
	i := int(n % BudgetSlots)
	if i < 0 {
		i += BudgetSlots
	}
	if w.number[i] != n {
		w.number[i], w.first[i], w.retries[i] = n, 0, 0
	}
	return i
}

func (w *window) addFirst(now time.Time) { w.first[w.position(now)]++ }

func (w *window) addRetry(now time.Time) { w.retries[w.position(now)]++ }

// sums returns the first attempts and retries of the window ending at now.
func (w *window) sums(now time.Time) (first, retries int64) {
	n := now.UnixNano() / int64(w.slot)
	for i := range BudgetSlots {
		if k := w.number[i]; k > n-BudgetSlots && k <= n {
			first += w.first[i]
			retries += w.retries[i]
		}
	}
	return first, retries
}

// Allows reports whether one more retry stays within b, given the first
// attempts and retries of the window.
func (b Budget) Allows(first, retries int64) bool {
	return float64(retries+1) <= b.Ratio*float64(first)+float64(b.Min)
}
