package fleet

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/names"
)

// upstream is one upstream's shared state as this process sees it: the
// mirrors of its records, the capacity it holds, and the writes it owes.
// It implements guard.SharedUpstream.
type upstream struct {
	f    *Fleet
	name string

	mu     sync.Mutex
	params guard.Params
	br     mirror[breakerRecord]
	lim    mirror[limitsRecord]
	hold   mirror[holdRecord]
	cap    mirror[capacityRecord]
	bud    mirror[budgetRecord]

	learned   guard.Limits   // the limits this process's own responses said
	inferred  guard.Inferred // the requests limit this process inferred from its 429s
	seen      remainingSeen  // what they said remained
	localHold holdRecord     // a hold this process asked for, until the watcher echoes it
	allow     allowance
	est       guard.Estimate // of this process's made attempts
	pend      pending
	firsts    map[int64]int64 // first attempts not yet written, by budget slot
	dirty     bool
	held      *probeReport  // the probe this process claimed and has not reported
	told      breaker.State // the state Options.OnBreakerChange was last told
}

// pending are the writes an upstream owes, made by the maintainer.
type pending struct {
	report *breakerReport
	probe  *probeReport
	hold   *holdRecord
	limits bool
	capFix *capFix // levels the provider says are lower
}

func newUpstream(f *Fleet, name string) *upstream {
	return &upstream{f: f, name: name, firsts: make(map[int64]int64)}
}

// apply mirrors the entry of a record of kind, unless epoch is over, and
// tells Options.OnBreakerChange of a breaker's change of state.
func (u *upstream) apply(kind string, e jetstream.KeyValueEntry, epoch uint64) {
	if from, to, changed := u.applyLocked(kind, e, epoch); changed && u.f.opts.OnBreakerChange != nil {
		u.f.opts.OnBreakerChange(u.name, from, to)
	}
}

func (u *upstream) applyLocked(kind string, e jetstream.KeyValueEntry, epoch uint64) (from, to breaker.State, changed bool) {
	put := e.Operation() == jetstream.KeyValuePut
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.f.epoch.Load() != epoch {
		return 0, 0, false
	}
	switch kind {
	case names.UpstreamBreaker:
		applyTo(&u.br, e, put, (*breakerRecord).valid)
		rec, ok := decode(e.Value(), (*breakerRecord).valid)
		to = breaker.Closed
		if put && ok {
			to = stateOf(rec.State)
		}
		from, changed = u.told, to != u.told
		u.told = to
	case names.UpstreamLimits:
		applyTo(&u.lim, e, put, (*limitsRecord).valid)
	case names.UpstreamHold:
		applyTo(&u.hold, e, put, (*holdRecord).valid)
	case names.UpstreamCapacity:
		applyTo(&u.cap, e, put, (*capacityRecord).valid)
	case names.UpstreamBudget:
		applyTo(&u.bud, e, put, (*budgetRecord).valid)
	}
	return from, to, changed
}

// stateOf is the breaker.State of a record's state.
func stateOf(s string) breaker.State {
	switch s {
	case stateOpen:
		return breaker.Open
	case stateHalfOpen:
		return breaker.HalfOpen
	}
	return breaker.Closed
}

func applyTo[T any](m *mirror[T], e jetstream.KeyValueEntry, put bool, valid func(*T) bool) {
	var rec T
	ok := false
	if put {
		rec, ok = decode(e.Value(), valid)
	}
	m.store(rec, ok, e.Revision())
}

// reset forgets the mirrors, for a new epoch; the capacity this process
// holds and the first attempts it has not written are kept.
func (u *upstream) reset() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.br, u.lim, u.hold, u.cap, u.bud = mirror[breakerRecord]{}, mirror[limitsRecord]{}, mirror[holdRecord]{}, mirror[capacityRecord]{}, mirror[budgetRecord]{}
	u.pend = pending{}
}

// dropPending forgets the writes owed (stale after a degradation), except
// the first attempts.
func (u *upstream) dropPending() {
	u.mu.Lock()
	u.pend = pending{}
	u.dirty = false
	u.mu.Unlock()
}

// markDirtyLocked queues u for the maintainer, once.
func (u *upstream) markDirtyLocked() {
	if u.dirty {
		return
	}
	select {
	case u.f.dirty <- u:
		u.dirty = true
	default: // the periodic flush takes it
	}
}

// flush makes the pending writes (and writes the batched first attempts
// when firsts is set).
func (u *upstream) flush(ctx context.Context, firsts bool) error {
	u.mu.Lock()
	p := u.pend
	u.pend, u.dirty = pending{}, false
	u.mu.Unlock()
	var errs []error
	if p.report != nil {
		errs = append(errs, u.writeReport(ctx, *p.report))
	}
	if p.probe != nil {
		errs = append(errs, u.writeProbe(ctx, *p.probe))
	}
	if p.hold != nil {
		errs = append(errs, u.writeHold(ctx, *p.hold))
	}
	if p.limits {
		errs = append(errs, u.writeLimits(ctx))
	}
	if p.capFix != nil {
		errs = append(errs, u.writeCapFix(ctx, *p.capFix))
	}
	if firsts {
		errs = append(errs, u.writeFirsts(ctx))
	}
	return errors.Join(errs...)
}

// leave makes the writes u owes before the process leaves the fleet: the
// pending ones, the batched first attempts, and the release of a probe
// still under way (its result will not be written: another process may
// probe at once).
func (u *upstream) leave(ctx context.Context) error {
	u.mu.Lock()
	if u.held != nil && u.pend.probe == nil {
		u.pend.probe = u.held // result Ignore: reopened, its cooldown over
	}
	u.held = nil
	u.mu.Unlock()
	return u.flush(ctx, true)
}

// limitsLocked are the limits in force at now: the fleet's learned ones,
// this process's latest observation over them, the configured ones over
// all; without any, the requests limit inferred from 429s.
func (u *upstream) limitsLocked(now time.Time) guard.Limits {
	l := u.knownLocked()
	if !l.Any() {
		l[guard.Requests] = u.inferredLocked(now).Limit(now)
	}
	return l
}

// knownLocked are the limits learned or configured.
func (u *upstream) knownLocked() guard.Limits {
	var l guard.Limits
	if u.lim.ok {
		l = guard.Limits(u.lim.rec.Limits)
	}
	return l.Over(u.learned).Over(u.params.Configured)
}

// inferredLocked is the lower of the fleet's inferred limit and this
// process's (which is newer until its write lands).
func (u *upstream) inferredLocked(now time.Time) guard.Inferred {
	if u.lim.ok && u.lim.rec.Inferred != nil && !u.inferred.Below(*u.lim.rec.Inferred, now) {
		return *u.lim.rec.Inferred
	}
	return u.inferred
}

// OpenError is the rejection of the fleet's breaker. It unwraps to
// breaker.ErrCircuitOpen.
type OpenError struct {
	Upstream string
	State    breaker.State // Open or HalfOpen
	// Until is when a probe may go (Open); Probe the process holding the
	// probe (HalfOpen).
	Until time.Time
	Probe string
	// By opened the breaker, for Reason.
	By, Reason string
}

// As lets errors.As find the fleet's rejection as a *breaker.OpenError,
// the process breaker's, so that callers read one type whichever breaker
// refused (the gateway's retry-after, for one).
func (e *OpenError) As(target any) bool {
	t, ok := target.(**breaker.OpenError)
	if ok {
		*t = &breaker.OpenError{Key: e.Upstream, Until: e.Until, State: e.State}
	}
	return ok
}

func (e *OpenError) Error() string {
	if e.State == breaker.HalfOpen {
		return "fleet breaker of " + e.Upstream + ": " + breaker.ErrCircuitOpen.Error() + " (half_open: the fleet's probe is in flight at " + e.Probe + ")"
	}
	s := "fleet breaker of " + e.Upstream + ": " + breaker.ErrCircuitOpen.Error() + " until " + e.Until.UTC().Format(time.RFC3339Nano)
	if e.By != "" {
		s += " (opened by " + e.By
		if e.Reason != "" {
			s += ": " + e.Reason
		}
		s += ")"
	}
	return s
}

// Unwrap returns breaker.ErrCircuitOpen.
func (e *OpenError) Unwrap() error { return breaker.ErrCircuitOpen }
