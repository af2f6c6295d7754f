package fleet

import (
	"context"
	"errors"
	"time"

	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/tokenbucket"
)

// contendedWait is the wait of a process that lost every compare-and-set
// of a chunk to others.
const contendedWait = 5 * time.Millisecond

// chunkWindow is how much of its own demand a process takes at once.
const chunkWindow = 250 * time.Millisecond

// Reserve implements guard.SharedUpstream: the hold first, then the
// allowance; when the allowance falls short, a chunk from the fleet's
// buckets by compare-and-set, or the wait until they hold the need.
func (u *upstream) Reserve(now time.Time, cost guard.Cost) (guard.Dims, time.Duration, *guard.LimitError, error) {
	u.mu.Lock()
	if lerr := u.holdLocked(now); lerr != nil {
		u.mu.Unlock()
		return guard.Dims{}, lerr.Until.Sub(now), lerr, nil
	}
	lim := u.limitsLocked(now)
	if !lim.Any() {
		u.mu.Unlock()
		return guard.Dims{}, 0, nil, nil // nothing taken: nothing to give back
	}
	took := lim.Dims()
	u.allow.lapse(now)
	if u.allow.covers(lim, cost) {
		u.allow.take(cost)
		u.mu.Unlock()
		return took, 0, nil, nil
	}
	var need guard.Cost
	for d := range guard.NumDims {
		need[d] = max(0, cost[d]-u.allow.available(d))
	}
	burst := u.params.Burst
	extra := u.allow.chunk(lim, cost, burst, u.f.Processes(), now)
	seen, est := u.seen, u.est
	u.mu.Unlock()

	t := &chunkTake{lim: lim, need: need, extra: extra, burst: burst, now: now, seen: &seen, est: est, by: u.f.opts.Process}
	ctx, cancel := u.f.withWait()
	defer cancel()
	_, _, err := cas(ctx, u.f, key(names.UpstreamCapacity, u.name), &u.cap, &u.mu, (*capacityRecord).valid, t.apply)
	if errors.Is(err, errContended) {
		// Others keep taking capacity: try again shortly.
		return guard.Dims{}, contendedWait, &guard.LimitError{Upstream: u.name, Fleet: true, Dim: guard.Requests, PerMinute: lim[guard.Requests]}, nil
	}
	if err != nil {
		return guard.Dims{}, 0, nil, u.f.failed("taking capacity of "+u.name, err)
	}
	if t.wait > 0 {
		return guard.Dims{}, t.wait, &guard.LimitError{Upstream: u.name, Fleet: true, Dim: t.waitDim, PerMinute: lim[t.waitDim]}, nil
	}
	grant := t.grant
	u.mu.Lock()
	u.allow.add(grant, now.Add(burst))
	u.allow.take(cost)
	u.mu.Unlock()
	return took, 0, nil, nil
}

// chunkTake is one compare-and-set on an upstream's capacity record: the
// fleet's buckets, refilled to now, give need at once and up to extra
// more (the chunk), or say how long until need fits.
type chunkTake struct {
	lim         guard.Limits
	need, extra guard.Cost
	burst       time.Duration
	now         time.Time
	seen        *remainingSeen
	est         guard.Estimate
	by          string
	// The outcome of the last apply.
	wait    time.Duration
	waitDim guard.Dim
	grant   guard.Cost
}

// apply is the compare-and-set's update of cur; it writes nothing when
// need does not fit (t.wait says how long until it does).
func (t *chunkTake) apply(cur capacityRecord, exists bool) (capacityRecord, bool, error) {
	next := refill(cur, exists, t.lim, t.burst, t.now, t.seen)
	t.wait, t.grant = 0, guard.Cost{}
	for d := range guard.NumDims {
		if t.lim[d] <= 0 {
			continue
		}
		b := tokenbucket.Bucket{Level: next.Levels[d], At: next.At}
		if w := b.Wait(tokenbucket.Limit{PerMinute: float64(t.lim[d]), Burst: t.burst}, t.need[d]); w > t.wait {
			t.wait, t.waitDim = w, d
		}
	}
	if t.wait > 0 {
		return cur, false, nil
	}
	for d := range guard.NumDims {
		if t.lim[d] > 0 {
			t.grant[d] = t.need[d] + min(max(next.Levels[d]-t.need[d], 0), t.extra[d])
			next.Levels[d] -= t.grant[d]
		}
	}
	if t.est.Known() {
		next.Est = dimsOf[float64](t.est.Cost())
	}
	next.By = t.by
	return next, true, nil
}

// remainingSeen is what the provider last said remained of each
// dimension, and when.
type remainingSeen struct {
	at    [guard.NumDims]tokenbucket.Bucket
	valid [guard.NumDims]bool
}

// refill is the capacity record brought forward to now under lim: a new
// dimension (or a new record) starts from what the provider last said
// remained (full when it said nothing), a refill is capped at the
// capacity, and at what the provider last told this process remained,
// refilled since (an upper bound of what it has: whatever the fleet's
// record missed, such as the attempts its processes made while they
// decided alone, the provider has counted).
func refill(cur capacityRecord, exists bool, lim guard.Limits, burst time.Duration, now time.Time, seen *remainingSeen) capacityRecord {
	next := capacityRecord{V: recordVersion, At: now, Est: cur.Est}
	for d := range guard.NumDims {
		if lim[d] <= 0 {
			continue
		}
		l := tokenbucket.Limit{PerMinute: float64(lim[d]), Burst: burst}
		if !exists {
			next.Levels[d] = guard.Start(l, now, seen.at[d], seen.valid[d]).Level
			continue
		}
		b := tokenbucket.Bucket{Level: cur.Levels[d], At: cur.At}.Refilled(l, now)
		next.Levels[d] = b.Level
		if seen.valid[d] {
			next.Levels[d] = min(b.Level, guard.Start(l, now, seen.at[d], true).Level)
		}
		if b.At.After(next.At) {
			next.At = b.At // a writer whose clock is ahead: keep its time
		}
	}
	if exists && cur.At.After(next.At) {
		next.At = cur.At
	}
	return next
}

// holdLocked is the hold in force at now, the fleet's or this process's
// own, as the error of the wait.
func (u *upstream) holdLocked(now time.Time) *guard.LimitError {
	h := u.localHold
	if u.hold.ok && u.hold.rec.Until.After(h.Until) {
		h = u.hold.rec
	}
	if !now.Before(h.Until) {
		return nil
	}
	reason := h.Reason
	if h.By != "" {
		reason += ", seen by " + h.By
	}
	return &guard.LimitError{Upstream: u.name, Fleet: true, Hold: true, Until: h.Until, Reason: reason}
}

// Observe implements guard.SharedUpstream: a settled reservation's
// difference goes back to the allowance (until one burst window after it
// was taken, as the chunk it came from would lapse) or is owed by it; a
// 429's reservation was spent (the guard says its actual cost is what it
// reserved: the fleet was ahead of the provider); limits the
// headers say that the fleet does not know yet, a hold later than the
// fleet's, and a provider's remaining capacity lower than the fleet's
// bucket are written by the maintainer.
func (u *upstream) Observe(now time.Time, o guard.SharedObservation) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if o.Reserved {
		var back, owed guard.Cost
		for d := range guard.NumDims {
			if o.Took[d] {
				back[d], owed[d] = max(0, o.Cost[d]-o.Actual[d]), max(0, o.Actual[d]-o.Cost[d])
			}
		}
		u.allow.lapse(now)
		u.allow.spend(owed)
		u.allow.add(back, o.ReservedAt.Add(u.params.Burst))
	}
	if o.Actual[guard.Requests] > 0 && o.Actual[guard.Tokens] > 0 {
		u.est.Add(o.Actual) // an attempt that used tokens (not a 503's nothing)
	}
	dirty := false
	for d := range guard.NumDims {
		if v := o.Headers.Limit[d]; v > 0 {
			u.learned[d] = v
			if !u.lim.ok || u.lim.rec.Limits[d] != v {
				u.pend.limits, dirty = true, true
			}
		}
	}
	if o.RateLimited && u.rateLimitedLocked(now, o.Hint) {
		dirty = true
	}
	if !o.HoldUntil.IsZero() && u.holdLocked(o.HoldUntil) == nil {
		h := holdRecord{V: recordVersion, Until: o.HoldUntil, Reason: o.HoldWhy, By: u.f.opts.Process, At: now}
		u.localHold, u.pend.hold, dirty = h, &h, true
	}
	for d := range guard.NumDims {
		if o.Headers.HasRemaining[d] {
			u.seen.at[d], u.seen.valid[d] = tokenbucket.Bucket{Level: float64(o.Headers.Remaining[d]), At: now}, true
		}
	}
	if u.remainingLowerLocked(now, &o.Headers) {
		dirty = true
	}
	if dirty {
		u.markDirtyLocked()
	}
}

// rateLimitedLocked takes in a 429 at now whose hint is hint (0: none):
// the provider had less than the attempt's cost, so this process's
// allowance goes, the fleet's buckets are empty as of now (the calls a
// hold releases are then spread over the refill, not sent at once), and,
// with no limit learned or configured, the inferred limit is lowered. It
// reports whether writes are owed.
func (u *upstream) rateLimitedLocked(now time.Time, hint time.Duration) bool {
	u.allow.lots = nil
	if !u.knownLocked().Any() {
		if next := u.inferredLocked(now).Lower(now, hint); next.Live(now) {
			u.inferred, u.pend.limits = next, true
		}
	}
	for d := range guard.NumDims {
		u.seen.at[d], u.seen.valid[d] = tokenbucket.Bucket{At: now}, true
	}
	if !u.cap.ok {
		return u.pend.limits
	}
	if u.pend.capFix == nil {
		u.pend.capFix = &capFix{}
	}
	lim := u.limitsLocked(now)
	for d := range guard.NumDims {
		if lim[d] > 0 {
			u.pend.capFix.level[d], u.pend.capFix.set[d] = 0, true
		}
	}
	return true
}

// remainingLowerLocked queues a correction of the fleet's buckets where
// the provider says less remains than they hold (by more than a tenth of
// a bucket): another consumer of the account, or a model that drifted.
func (u *upstream) remainingLowerLocked(now time.Time, h *guard.Observed) bool {
	if !u.cap.ok {
		return false
	}
	lim := u.limitsLocked(now)
	fix := false
	for d := range guard.NumDims {
		if lim[d] <= 0 || !h.HasRemaining[d] {
			continue
		}
		l := tokenbucket.Limit{PerMinute: float64(lim[d]), Burst: u.params.Burst}
		level := tokenbucket.Bucket{Level: u.cap.rec.Levels[d], At: u.cap.rec.At}.Refilled(l, now).Level
		if r := float64(h.Remaining[d]); level-r > max(1, l.Capacity()/10) {
			if u.pend.capFix == nil {
				u.pend.capFix = &capFix{}
			}
			u.pend.capFix.level[d], u.pend.capFix.set[d], fix = r, true, true
		}
	}
	return fix
}

// writeHold writes a hold unless the fleet holds longer already.
func (u *upstream) writeHold(ctx context.Context, h holdRecord) error {
	_, _, err := cas(ctx, u.f, key(names.UpstreamHold, u.name), &u.hold, &u.mu, (*holdRecord).valid,
		func(cur holdRecord, exists bool) (holdRecord, bool, error) {
			if exists && !h.Until.After(cur.Until) {
				return cur, false, nil
			}
			return h, true, nil
		})
	return err
}

// writeLimits writes the limits this process learned where they differ
// from the fleet's.
func (u *upstream) writeLimits(ctx context.Context) error {
	u.mu.Lock()
	learned, inferred := u.learned, u.inferred
	u.mu.Unlock()
	me, now := u.f.opts.Process, u.f.opts.Now()
	_, _, err := cas(ctx, u.f, key(names.UpstreamLimits, u.name), &u.lim, &u.mu, (*limitsRecord).valid,
		func(cur limitsRecord, exists bool) (limitsRecord, bool, error) {
			next := cur
			if !exists {
				next = limitsRecord{V: recordVersion}
			}
			next.Limits = dimsOf[int64](guard.Limits(next.Limits).Over(learned))
			lower := inferred.Live(now) && (next.Inferred == nil || inferred.Below(*next.Inferred, now))
			if lower {
				next.Inferred = &inferred
			}
			if exists && next.Limits == cur.Limits && !lower {
				return cur, false, nil
			}
			next.By, next.At = me, now
			return next, true, nil
		})
	return err
}

// capFix are the levels the provider says remain, by dimension.
type capFix struct {
	level [guard.NumDims]float64
	set   [guard.NumDims]bool
}

// writeCapFix lowers the fleet's buckets to what the provider says
// remains.
func (u *upstream) writeCapFix(ctx context.Context, fix capFix) error {
	now := u.f.opts.Now()
	u.mu.Lock()
	lim, burst := u.limitsLocked(now), u.params.Burst
	u.mu.Unlock()
	_, _, err := cas(ctx, u.f, key(names.UpstreamCapacity, u.name), &u.cap, &u.mu, (*capacityRecord).valid,
		func(cur capacityRecord, exists bool) (capacityRecord, bool, error) {
			if !exists {
				return cur, false, nil
			}
			next := refill(cur, exists, lim, burst, now, &remainingSeen{})
			lowered := false
			for d := range guard.NumDims {
				if lim[d] > 0 && fix.set[d] && fix.level[d] < next.Levels[d] {
					next.Levels[d], lowered = fix.level[d], true
				}
			}
			next.By = u.f.opts.Process
			return next, lowered, nil
		})
	return err
}

// Estimate implements guard.SharedUpstream: this process's estimate once
// its attempts gave it one, else the one the fleet's capacity record
// carries.
func (u *upstream) Estimate() (guard.Cost, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.est.Known() {
		return u.est.Cost(), true
	}
	if u.cap.ok && u.cap.rec.Est[guard.Requests] > 0 {
		return guard.Cost(u.cap.rec.Est), true
	}
	return guard.Cost{}, false
}
