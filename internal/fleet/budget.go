package fleet

import (
	"context"
	"errors"
	"time"

	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/names"
)

// slotLength is the length of a budget slot, in whole milliseconds (as
// the record writes it).
func slotLength(b guard.Budget) time.Duration {
	return max((b.Window / guard.BudgetSlots).Truncate(time.Millisecond), time.Millisecond)
}

// slotOf is the number of the slot of length slot that holds now.
func slotOf(now time.Time, slot time.Duration) int64 { return now.UnixNano() / int64(slot) }

// First implements guard.SharedUpstream: the first attempt is counted
// locally and written with the next batch.
func (u *upstream) First(now time.Time) {
	u.mu.Lock()
	u.firsts[slotOf(now, slotLength(u.params.Budget))]++
	u.mu.Unlock()
}

// Retry implements guard.SharedUpstream: the retry is taken by
// compare-and-set, together with this process's unwritten first attempts,
// if the window's retries stay within the budget of its first attempts.
func (u *upstream) Retry(now time.Time) error {
	u.mu.Lock()
	b := u.params.Budget
	u.mu.Unlock()
	firsts := u.takeFirsts()
	var refused *guard.BudgetError
	ctx, cancel := u.f.withWait()
	defer cancel()
	_, wrote, err := cas(ctx, u.f, key(names.UpstreamBudget, u.name), &u.bud, &u.mu, (*budgetRecord).valid,
		func(cur budgetRecord, exists bool) (budgetRecord, bool, error) {
			next := u.window(cur, exists, now, firsts)
			first, retries := sums(next, now)
			if !b.Allows(first, retries) {
				refused = &guard.BudgetError{Upstream: u.name, Fleet: true, Retries: retries, First: first,
					Ratio: b.Ratio, Min: b.Min, Window: b.Window}
				return cur, false, nil
			}
			addTo(&next, slotOf(now, time.Duration(next.SlotMS)*time.Millisecond), 0, 1)
			return next, true, nil
		})
	if !wrote {
		u.giveBackFirsts(firsts)
	}
	if errors.Is(err, errContended) {
		// Others keep taking retries: refuse this one rather than let it
		// pass unaccounted.
		u.mu.Lock()
		first, retries := sums(u.bud.rec, now)
		u.mu.Unlock()
		return &guard.BudgetError{Upstream: u.name, Fleet: true, Retries: retries, First: first, Ratio: b.Ratio, Min: b.Min, Window: b.Window}
	}
	if err != nil {
		return u.f.failed("taking a retry of "+u.name, err)
	}
	if refused != nil {
		return refused
	}
	return nil
}

// writeFirsts writes the batched first attempts.
func (u *upstream) writeFirsts(ctx context.Context) error {
	firsts := u.takeFirsts()
	if len(firsts) == 0 {
		return nil
	}
	now := u.f.opts.Now()
	_, wrote, err := cas(ctx, u.f, key(names.UpstreamBudget, u.name), &u.bud, &u.mu, (*budgetRecord).valid,
		func(cur budgetRecord, exists bool) (budgetRecord, bool, error) {
			return u.window(cur, exists, now, firsts), true, nil
		})
	if !wrote {
		u.giveBackFirsts(firsts)
	}
	return err
}

// takeFirsts takes the first attempts not yet written, so that no other
// write adds them too; a write that fails gives them back.
func (u *upstream) takeFirsts() map[int64]int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	firsts := u.firsts
	u.firsts = make(map[int64]int64, len(firsts))
	return firsts
}

// giveBackFirsts returns first attempts that were not written.
func (u *upstream) giveBackFirsts(firsts map[int64]int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for s, n := range firsts {
		u.firsts[s] += n
	}
}

// window is the budget record brought forward to now, with firsts added
// (those of slots already out of the window are dropped): slots out of the
// window are dropped, and a record of another slot length starts afresh.
func (u *upstream) window(cur budgetRecord, exists bool, now time.Time, firsts map[int64]int64) budgetRecord {
	u.mu.Lock()
	slot := slotLength(u.params.Budget)
	u.mu.Unlock()
	next := budgetRecord{V: recordVersion, SlotMS: slot.Milliseconds(), By: u.f.opts.Process, At: now}
	n := slotOf(now, slot)
	if exists && cur.SlotMS == next.SlotMS {
		for _, s := range cur.Slots {
			if s.Slot > n-guard.BudgetSlots && s.Slot <= n {
				next.Slots = append(next.Slots, s)
			}
		}
	}
	for s, c := range firsts {
		if s > n-guard.BudgetSlots && s <= n {
			addTo(&next, s, c, 0)
		}
	}
	return next
}

// addTo adds first attempts and retries to slot s of r.
func addTo(r *budgetRecord, s, first, retries int64) {
	for i := range r.Slots {
		if r.Slots[i].Slot == s {
			r.Slots[i].First += first
			r.Slots[i].Retries += retries
			return
		}
	}
	r.Slots = append(r.Slots, budgetSlot{Slot: s, First: first, Retries: retries})
}

// sums returns the first attempts and retries of r's window at now.
func sums(r budgetRecord, now time.Time) (first, retries int64) {
	n := slotOf(now, time.Duration(r.SlotMS)*time.Millisecond)
	for _, s := range r.Slots {
		if s.Slot > n-guard.BudgetSlots && s.Slot <= n {
			first += s.First
			retries += s.Retries
		}
	}
	return first, retries
}
