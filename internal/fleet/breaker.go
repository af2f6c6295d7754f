package fleet

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/names"
)

// breakerReport is the failures (after a success, when reset) of attempts
// admitted while the breaker was closed in generation gen.
type breakerReport struct {
	gen      uint64
	reset    bool
	failures int
}

// probeReport is the result of the probe claimed in generation gen.
type probeReport struct {
	gen    uint64
	result breaker.Result
}

// errClosed: the breaker turned out closed when a probe was to be claimed.
var errClosed = errors.New("fleet: breaker closed")

// rejection is the rejection of an attempt at now by the breaker r, or nil
// when it admits one (closed) or a probe (open past its cooldown, or a
// probe whose claim ran out or whose process is gone).
func (u *upstream) rejection(r *breakerRecord, now time.Time) error {
	switch {
	case r.State == stateOpen && now.Before(r.Until):
		return &OpenError{Upstream: u.name, State: breaker.Open, Until: r.Until, By: r.By, Reason: r.Reason}
	case r.State == stateHalfOpen && r.Probe != "" && now.Before(r.ProbeUntil) && u.f.alive(r.Probe):
		return &OpenError{Upstream: u.name, State: breaker.HalfOpen, Probe: r.Probe}
	}
	return nil
}

// claimFor is how long a probe's claim lasts: a cooldown, and at least
// the attempt timeout and the write of the result, so that a probe
// slower than the cooldown is not taken over (its result would be
// dropped). A process that dies frees the claim sooner (Fleet.alive).
func claimFor(p guard.Params, wait time.Duration) time.Duration {
	return max(p.Cooldown, p.AttemptTimeout+2*wait)
}

// Check implements guard.SharedUpstream.
func (u *upstream) Check(now time.Time) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.br.ok {
		return nil
	}
	return u.rejection(&u.br.rec, now)
}

// State implements guard.SharedUpstream.
func (u *upstream) State(now time.Time) breaker.State {
	u.mu.Lock()
	rec, ok := u.br.rec, u.br.ok
	u.mu.Unlock()
	switch {
	case !ok || rec.State == stateClosed:
		return breaker.Closed
	case rec.State == stateHalfOpen && u.rejection(&rec, now) != nil:
		return breaker.HalfOpen
	}
	return breaker.Open
}

// Allow implements guard.SharedUpstream: a closed breaker admits at once
// from the mirror; after the cooldown the probe is claimed by
// compare-and-set, so that the whole fleet sends exactly one.
func (u *upstream) Allow(now time.Time) (guard.SharedPermit, error) {
	u.mu.Lock()
	rec, ok := u.br.rec, u.br.ok
	claim := claimFor(u.params, u.f.opts.Wait)
	u.mu.Unlock()
	if !ok || rec.State == stateClosed {
		return guard.SharedPermit{Generation: rec.Generation}, nil
	}
	if err := u.rejection(&rec, now); err != nil {
		return guard.SharedPermit{}, err
	}
	me := u.f.opts.Process
	ctx, cancel := u.f.withWait()
	defer cancel()
	got, _, err := cas(ctx, u.f, key(names.UpstreamBreaker, u.name), &u.br, &u.mu, (*breakerRecord).valid,
		func(cur breakerRecord, exists bool) (breakerRecord, bool, error) {
			if !exists || cur.State == stateClosed {
				return cur, false, errClosed
			}
			if err := u.rejection(&cur, now); err != nil {
				return cur, false, err
			}
			next := cur
			next.State, next.Generation, next.Probe, next.ProbeUntil = stateHalfOpen, cur.Generation+1, me, now.Add(claim)
			next.By, next.At, next.Reason = me, now, "the probe is claimed"
			return next, true, nil
		})
	var oe *OpenError
	switch {
	case err == nil:
		u.mu.Lock()
		u.held = &probeReport{gen: got.Generation, result: breaker.Ignore}
		u.mu.Unlock()
		return guard.SharedPermit{Generation: got.Generation, Probe: true}, nil
	case errors.Is(err, errClosed):
		return guard.SharedPermit{Generation: got.Generation}, nil
	case errors.As(err, &oe):
		return guard.SharedPermit{}, err
	case errors.Is(err, errContended):
		// Others keep changing the breaker: one of them has the probe.
		return guard.SharedPermit{}, &OpenError{Upstream: u.name, State: breaker.HalfOpen, Probe: "another process"}
	}
	return guard.SharedPermit{}, u.f.failed("claiming the probe of "+u.name, err)
}

// Done implements guard.SharedUpstream. A probe's result closes or
// reopens the breaker: it is written at once, within Options.Wait (and
// left to the maintainer, or Close, only when that write fails). The
// reports of a closed breaker are written by the maintainer: a failure
// counts towards the threshold, a success resets the count (written only
// when there is a count to reset).
func (u *upstream) Done(_ time.Time, p guard.SharedPermit, r breaker.Result) {
	if p.Probe {
		rep := probeReport{gen: p.Generation, result: r}
		u.mu.Lock()
		if u.held != nil && u.held.gen == p.Generation {
			u.held = nil
		}
		u.mu.Unlock()
		ctx, cancel := u.f.withWait()
		err := u.writeProbe(ctx, rep)
		cancel()
		if err != nil {
			u.mu.Lock()
			u.pend.probe = &rep
			u.markDirtyLocked()
			u.mu.Unlock()
		}
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	rep := u.pend.report
	if rep != nil && rep.gen != p.Generation {
		rep = nil // a report of an older generation is stale
	}
	switch r {
	case breaker.Failure:
		if rep == nil {
			rep = &breakerReport{gen: p.Generation}
		}
		rep.failures++
	case breaker.Success:
		counted := u.br.ok && u.br.rec.Generation == p.Generation && u.br.rec.Failures > 0
		if rep == nil && !counted {
			return // nothing to reset
		}
		if rep == nil {
			rep = &breakerReport{gen: p.Generation}
		}
		rep.reset, rep.failures = true, 0
	default:
		return
	}
	u.pend.report = rep
	u.markDirtyLocked()
}

// writeReport applies a report of the closed breaker: the process whose
// report reaches the threshold opens the breaker for the fleet.
func (u *upstream) writeReport(ctx context.Context, rep breakerReport) error {
	u.mu.Lock()
	threshold, cooldown := u.params.FailureThreshold, u.params.Cooldown
	u.mu.Unlock()
	me, now := u.f.opts.Process, u.f.opts.Now()
	_, _, err := cas(ctx, u.f, key(names.UpstreamBreaker, u.name), &u.br, &u.mu, (*breakerRecord).valid,
		func(cur breakerRecord, exists bool) (breakerRecord, bool, error) {
			if !exists {
				cur = breakerRecord{V: recordVersion, State: stateClosed}
			}
			if cur.State != stateClosed || cur.Generation != rep.gen {
				return cur, false, nil // the breaker moved on
			}
			next := cur
			if rep.reset {
				next.Failures = 0
			}
			next.Failures += rep.failures
			if exists && next.Failures == cur.Failures {
				return cur, false, nil
			}
			next.By, next.At, next.Reason = me, now, ""
			if threshold > 0 && next.Failures >= threshold {
				next.State, next.Generation, next.Until = stateOpen, cur.Generation+1, now.Add(cooldown)
				next.Reason = strconv.Itoa(next.Failures) + " consecutive retryable failures across the fleet"
				next.Failures = 0
			}
			return next, true, nil
		})
	return err
}

// writeProbe applies the result of this process's probe.
func (u *upstream) writeProbe(ctx context.Context, rep probeReport) error {
	u.mu.Lock()
	cooldown := u.params.Cooldown
	u.mu.Unlock()
	me, now := u.f.opts.Process, u.f.opts.Now()
	_, _, err := cas(ctx, u.f, key(names.UpstreamBreaker, u.name), &u.br, &u.mu, (*breakerRecord).valid,
		func(cur breakerRecord, exists bool) (breakerRecord, bool, error) {
			if !exists || cur.State != stateHalfOpen || cur.Generation != rep.gen || cur.Probe != me {
				return cur, false, nil // replaced: its result no longer counts
			}
			next := breakerRecord{V: recordVersion, Generation: cur.Generation + 1, By: me, At: now}
			switch rep.result {
			case breaker.Success:
				next.State, next.Reason = stateClosed, "the probe succeeded"
			case breaker.Failure:
				next.State, next.Until, next.Reason = stateOpen, now.Add(cooldown), "the probe failed"
			default:
				next.State, next.Until, next.Reason = stateOpen, now, "the probe ended without a verdict; another may go"
			}
			return next, true, nil
		})
	return err
}
