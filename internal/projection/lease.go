package projection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/names"
)

// ErrLeaseLost means another aggregator instance took over the lease: this
// one must stop writing at once.
var ErrLeaseLost = errors.New("projection: lease lost to another instance")

// ErrYield means the lease holder stepped aside for a rebuild.
var ErrYield = errors.New("projection: stepped aside for a rebuild")

// leaseValue is what the lease key holds.
type leaseValue struct {
	Holder string        `json:"holder"`
	TTL    time.Duration `json:"ttl_ns"`
	// Rules is the holder's RulesVersion, for operators.
	Rules int `json:"rules,omitempty"`
}

// lease makes one aggregator instance the single writer of the projection.
// The holder renews it (a compare-and-set rewrite, which must answer
// within TTL/3) every TTL/3. A standby takes it over when it has seen the
// same revision for longer than the holder's TTL (the one the holder
// wrote, never the standby's own: see holderTTL) on its own clock, so no
// two machines' clocks are compared: a takeover comes at least the
// holder's TTL after the holder sent its last successful renewal. The holder counts its
// lease as good for two thirds of that (valid), and sends no write
// outside it. The lease alone is not a fence, since a process can stop
// between its check and its write: the fence is the term (see term.go).
type lease struct {
	kv     jetstream.KeyValue
	key    string // names.LeaseKey when empty
	holder string
	ttl    time.Duration
	now    func() time.Time
	rules  int
	rev    uint64
	// okAt is when the last successful acquisition or renewal was sent;
	// the keeper writes it while the writer reads it.
	mu   sync.Mutex
	okAt time.Time
	// fault is Config.Faults (nil in production): called before every
	// renewal, so a test can freeze the renewals with the batch.
	fault func(FaultPoint) error
	// lenient leases (the rebuild claim) guard no write: keep ends only
	// when another holder took the lease, not when renewals are slow.
	lenient bool
}

// acquire blocks until this instance holds the lease or ctx ends.
func (l *lease) acquire(ctx context.Context, poll time.Duration) error {
	val, err := json.Marshal(leaseValue{Holder: l.holder, TTL: l.ttl, Rules: l.rules})
	if err != nil {
		return err
	}
	var seenRev, yieldRev uint64
	var seenAt, yieldAt time.Time
	for {
		wait, err := false, error(nil)
		if l.name() == names.LeaseKey {
			wait, err = l.yieldPending(ctx, &yieldRev, &yieldAt)
		}
		if err != nil {
			return err
		}
		var e jetstream.KeyValueEntry
		if wait {
			err = errWaitForYield
		} else {
			e, err = l.kv.Get(ctx, l.name())
		}
		switch {
		case errors.Is(err, errWaitForYield):
		case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
			if ok, err := l.take(ctx, val, 0); ok || err != nil {
				return err
			}
		case err != nil:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("projection: reading lease: %w", err)
		default:
			var cur leaseValue
			_ = json.Unmarshal(e.Value(), &cur) // a garbled lease is treated as foreign
			now := l.now()
			if e.Revision() != seenRev {
				seenRev, seenAt = e.Revision(), now
			}
			if cur.Holder == l.holder || now.Sub(seenAt) > holderTTL(cur, l.ttl) {
				if ok, err := l.take(ctx, val, e.Revision()); ok || err != nil {
					return err
				}
			}
		}
		if err := sleep(ctx, poll); err != nil {
			return err
		}
	}
}

// take writes the lease value val with compare-and-set on rev (0: the key
// is absent) and reports whether this instance holds the lease now; false
// with no error means someone else wrote it first.
func (l *lease) take(ctx context.Context, val []byte, rev uint64) (bool, error) {
	sent := l.now()
	var err error
	var got uint64
	if rev == 0 {
		got, err = l.kv.Create(ctx, l.name(), val)
	} else {
		got, err = l.kv.Update(ctx, l.name(), val, rev)
	}
	switch {
	case err == nil:
		l.held(got, sent)
		return true, nil
	case errors.Is(err, jetstream.ErrKeyExists):
		return false, nil
	default:
		return false, fmt.Errorf("projection: writing %s: %w", l.name(), err)
	}
}

// fallbackTTL is the TTL given to a lease, claim or yield whose value
// names none (garbled, or written by something else): the default TTL, or
// the waiter's own if longer.
const fallbackTTL = 10 * time.Second

// holderTTL is how long a waiter must see the same revision of v before
// it may take it over: the TTL its holder wrote, whatever the waiter's own
// (a holder renews every third of its own TTL, so a waiter with a shorter
// one would take a lease that is renewed in time). Only a value that names
// no TTL gets the longer of fallbackTTL and the waiter's own.
func holderTTL(v leaseValue, own time.Duration) time.Duration {
	if v.TTL > 0 {
		return v.TTL
	}
	return max(own, fallbackTTL)
}

// sleep waits d, or returns ctx's error when it ends first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

var errWaitForYield = errors.New("a rebuild asked for the lease")

// yieldPending reports whether someone else's fresh yield request is in
// force; a stale one is deleted.
func (l *lease) yieldPending(ctx context.Context, rev *uint64, at *time.Time) (bool, error) {
	e, err := l.kv.Get(ctx, names.YieldKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("projection: reading %s: %w", names.YieldKey, err)
	}
	var v leaseValue
	_ = json.Unmarshal(e.Value(), &v)
	if v.Holder == l.holder {
		return false, nil
	}
	now := l.now()
	if e.Revision() != *rev {
		*rev, *at = e.Revision(), now
	}
	if now.Sub(*at) <= holderTTL(v, l.ttl) {
		return true, nil
	}
	_ = l.kv.Delete(ctx, names.YieldKey, jetstream.LastRevision(e.Revision())) // stale: its rebuild is gone
	return false, nil
}

// yieldRequested reports whether another instance has asked for the lease.
func (l *lease) yieldRequested(ctx context.Context) bool {
	e, err := l.kv.Get(ctx, names.YieldKey)
	if err != nil {
		return false
	}
	var v leaseValue
	_ = json.Unmarshal(e.Value(), &v)
	return v.Holder != l.holder
}

// renew rewrites the lease; ErrLeaseLost when someone else changed it.
// It gives up when the lease stops being valid (two thirds of the TTL
// after the last renewal was sent), so that a hung request cannot outlast
// the lease.
func (l *lease) renew(ctx context.Context) error {
	val, err := json.Marshal(leaseValue{Holder: l.holder, TTL: l.ttl, Rules: l.rules})
	if err != nil {
		return err
	}
	l.mu.Lock()
	wait := l.okAt.Add(l.validFor()).Sub(l.now())
	l.mu.Unlock()
	if l.lenient {
		wait = l.ttl / 3
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	sent := l.now()
	rev, err := l.kv.Update(ctx, l.name(), val, l.rev)
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyNotFound) {
			return ErrLeaseLost
		}
		return fmt.Errorf("projection: renewing lease: %w", err)
	}
	l.held(rev, sent)
	return nil
}

// held records a successful acquisition or renewal sent at sent.
func (l *lease) held(rev uint64, sent time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rev, l.okAt = rev, sent
}

func (l *lease) name() string {
	if l.key == "" {
		return names.LeaseKey
	}
	return l.key
}

// validFor is how long after sending its last successful renewal the
// holder counts its lease as good: two thirds of the TTL, the rest being
// the margin for the two clocks' rates and for scheduling.
func (l *lease) validFor() time.Duration { return l.ttl * 2 / 3 }

// valid returns ErrLeaseLost when the lease may have lapsed: no write may
// be sent then.
func (l *lease) valid() error {
	l.mu.Lock()
	okAt := l.okAt
	l.mu.Unlock()
	if d := l.now().Sub(okAt); d >= l.validFor() {
		return fmt.Errorf("%w: not renewed for %s", ErrLeaseLost, d.Round(time.Millisecond))
	}
	return nil
}

// keep renews the lease every TTL/3 until ctx ends, and returns
// ErrLeaseLost (or the renewal error) when it can no longer prove it holds
// it for the next TTL.
func (l *lease) keep(ctx context.Context) error {
	every := l.ttl / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := seam(l.fault).hit(FaultRenew); err != nil {
			return err
		}
		err := l.renew(ctx)
		if err == nil {
			if l.name() == names.LeaseKey && l.yieldRequested(ctx) {
				return ErrYield
			}
			continue
		}
		if errors.Is(err, ErrLeaseLost) || ctx.Err() != nil {
			return err
		}
		// A transient failure: keep trying while the lease cannot have
		// expired for the others yet (a lenient one, while nobody took it).
		if verr := l.valid(); verr != nil && !l.lenient {
			return fmt.Errorf("%w (last error: %v)", verr, err)
		}
	}
}

// release deletes the lease so a standby can take over at once.
func (l *lease) release(ctx context.Context) {
	_ = l.kv.Delete(ctx, l.name(), jetstream.LastRevision(l.rev))
}

// errHeld means claim found the lease held by a live holder.
var errHeld = errors.New("held by a live holder")

// claim takes the lease when it is free, or stale (not renewed for longer
// than its holder's TTL on this clock, see holderTTL). When its holder
// renews it meanwhile, it is alive and claim returns errHeld at once,
// naming the holder; so claim answers within a renewal interval when the
// holder is alive, and within the holder's TTL when it died.
func (l *lease) claim(ctx context.Context, poll time.Duration) error {
	val, err := json.Marshal(leaseValue{Holder: l.holder, TTL: l.ttl, Rules: l.rules})
	if err != nil {
		return err
	}
	var seenRev uint64
	var seenAt time.Time
	for {
		e, err := l.kv.Get(ctx, l.name())
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
			if ok, err := l.take(ctx, val, 0); ok || err != nil {
				return err
			}
		case err != nil:
			return fmt.Errorf("projection: reading %s: %w", l.name(), err)
		default:
			var cur leaseValue
			_ = json.Unmarshal(e.Value(), &cur) // a garbled value is a foreign holder's
			now := l.now()
			switch {
			case seenRev == 0:
				seenRev, seenAt = e.Revision(), now
			case e.Revision() != seenRev:
				return fmt.Errorf("%w: %s holds %s and renews it (its TTL is %s)", errHeld, cur.Holder, l.name(), holderTTL(cur, l.ttl))
			case now.Sub(seenAt) > holderTTL(cur, l.ttl):
				if ok, err := l.take(ctx, val, e.Revision()); ok || err != nil {
					return err
				}
				seenRev = 0
			}
		}
		if err := sleep(ctx, poll); err != nil {
			return err
		}
	}
}
