package projection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrLeaseLost means another aggregator instance took over the lease: this
// one must stop writing at once.
var ErrLeaseLost = errors.New("projection: lease lost to another instance")

const leaseKey = "lease"

// yieldKey asks the lease holder to step aside: a rebuild writes it (and
// keeps rewriting it every TTL/3) while it switches the live ledger over.
// A yield request nobody has rewritten for a TTL is stale and ignored.
const yieldKey = "yield"

// ErrYield means the lease holder stepped aside for a rebuild.
var ErrYield = errors.New("projection: stepped aside for a rebuild")

// leaseValue is what the lease key holds.
type leaseValue struct {
	Holder string        `json:"holder"`
	TTL    time.Duration `json:"ttl_ns"`
}

// lease makes one aggregator instance the single writer of the projection.
// The holder renews it (a compare-and-set rewrite) every TTL/3. A standby
// takes it over when it has seen the same revision for longer than the TTL
// on its own clock, so no two machines' clocks are compared. The lease
// alone is not a fence: every projection write is compare-and-set as well,
// so a paused former holder fails on its first write after a takeover.
type lease struct {
	kv     jetstream.KeyValue
	holder string
	ttl    time.Duration
	now    func() time.Time
	rev    uint64
	// fault is Config.Faults (nil in production): called before every
	// renewal, so a test can freeze the renewals with the batch.
	fault func(FaultPoint) error
}

// acquire blocks until this instance holds the lease or ctx ends.
func (l *lease) acquire(ctx context.Context, poll time.Duration) error {
	val, err := json.Marshal(leaseValue{Holder: l.holder, TTL: l.ttl})
	if err != nil {
		return err
	}
	var seenRev, yieldRev uint64
	var seenAt, yieldAt time.Time
	for {
		wait, err := l.yieldPending(ctx, &yieldRev, &yieldAt)
		if err != nil {
			return err
		}
		var e jetstream.KeyValueEntry
		if wait {
			err = errWaitForYield
		} else {
			e, err = l.kv.Get(ctx, leaseKey)
		}
		switch {
		case errors.Is(err, errWaitForYield):
		case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
			rev, cerr := l.kv.Create(ctx, leaseKey, val)
			if cerr == nil {
				l.rev = rev
				return nil
			}
			if !errors.Is(cerr, jetstream.ErrKeyExists) {
				return fmt.Errorf("projection: creating lease: %w", cerr)
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
			ttl := cur.TTL
			if ttl <= 0 || ttl > 10*l.ttl {
				ttl = l.ttl
			}
			if cur.Holder == l.holder || now.Sub(seenAt) > ttl {
				rev, uerr := l.kv.Update(ctx, leaseKey, val, e.Revision())
				if uerr == nil {
					l.rev = rev
					return nil
				}
				if !errors.Is(uerr, jetstream.ErrKeyExists) {
					return fmt.Errorf("projection: taking over lease: %w", uerr)
				}
			}
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

var errWaitForYield = errors.New("a rebuild asked for the lease")

// yieldPending reports whether someone else's fresh yield request is in
// force; a stale one is deleted.
func (l *lease) yieldPending(ctx context.Context, rev *uint64, at *time.Time) (bool, error) {
	e, err := l.kv.Get(ctx, yieldKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("projection: reading %s: %w", yieldKey, err)
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
	if now.Sub(*at) <= l.ttl {
		return true, nil
	}
	_ = l.kv.Delete(ctx, yieldKey, jetstream.LastRevision(e.Revision())) // stale: its rebuild is gone
	return false, nil
}

// yieldRequested reports whether another instance has asked for the lease.
func (l *lease) yieldRequested(ctx context.Context) bool {
	e, err := l.kv.Get(ctx, yieldKey)
	if err != nil {
		return false
	}
	var v leaseValue
	_ = json.Unmarshal(e.Value(), &v)
	return v.Holder != l.holder
}

// renew rewrites the lease; ErrLeaseLost when someone else changed it.
func (l *lease) renew(ctx context.Context) error {
	val, err := json.Marshal(leaseValue{Holder: l.holder, TTL: l.ttl})
	if err != nil {
		return err
	}
	rev, err := l.kv.Update(ctx, leaseKey, val, l.rev)
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyNotFound) {
			return ErrLeaseLost
		}
		return fmt.Errorf("projection: renewing lease: %w", err)
	}
	l.rev = rev
	return nil
}

// keep renews the lease every TTL/3 until ctx ends, and returns
// ErrLeaseLost (or the renewal error) when it can no longer prove it holds
// it for the next TTL.
func (l *lease) keep(ctx context.Context) error {
	every := l.ttl / 3
	t := time.NewTicker(every)
	defer t.Stop()
	lastOK := l.now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if l.fault != nil {
			if err := l.fault(FaultRenew); err != nil {
				return crashError{err}
			}
		}
		err := l.renew(ctx)
		if err == nil {
			lastOK = l.now()
			if l.yieldRequested(ctx) {
				return ErrYield
			}
			continue
		}
		if errors.Is(err, ErrLeaseLost) || ctx.Err() != nil {
			return err
		}
		// A transient failure: keep trying while the lease cannot have
		// expired for the others yet.
		if l.now().Sub(lastOK) > l.ttl*2/3 {
			return fmt.Errorf("%w: could not renew for %s: %v", ErrLeaseLost, l.now().Sub(lastOK).Round(time.Millisecond), err)
		}
	}
}

// release deletes the lease so a standby can take over at once.
func (l *lease) release(ctx context.Context) {
	_ = l.kv.Delete(ctx, leaseKey, jetstream.LastRevision(l.rev))
}
