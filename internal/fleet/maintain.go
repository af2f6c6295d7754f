package fleet

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/topology"
)

// maintain is the maintainer goroutine: it follows the connection's
// status, (re)builds the watcher, makes the writes that are off the calls'
// paths, writes the heartbeat, and restores the shared state after a
// degradation.
func (f *Fleet) maintain(status chan nats.Status) {
	defer f.nc.RemoveStatusListener(status)
	tick := time.NewTicker(max(f.opts.Heartbeat/4, time.Millisecond))
	defer tick.Stop()
	var lastBeat time.Time
	for {
		select {
		case <-f.stop:
			return
		case st, ok := <-status:
			if !ok {
				status = nil
				continue
			}
			if st == nats.CONNECTED {
				f.mu.Lock()
				f.resyncDue = true
				f.mu.Unlock()
				f.recover()
				continue
			}
			f.degrade("the NATS connection is "+st.String(), true)
		case <-f.kick:
			f.recover()
		case u := <-f.dirty:
			f.flush(u, false)
		case <-tick.C:
			for _, u := range f.snapshot() {
				f.flush(u, true)
			}
			if f.healthy.Load() && time.Since(lastBeat) >= f.opts.Heartbeat {
				if f.heartbeat() == nil {
					lastBeat = time.Now()
				}
				f.countProcesses()
			}
			f.recover()
		}
	}
}

// snapshot returns the upstreams known so far.
func (f *Fleet) snapshot() []*upstream {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*upstream, 0, len(f.upstreams))
	for _, u := range f.upstreams {
		out = append(out, u)
	}
	return out
}

// flush makes u's pending writes (with its batched first attempts when
// firsts is set). While degraded, the pending reports are stale and
// dropped; the first attempts are kept for later.
func (f *Fleet) flush(u *upstream, firsts bool) {
	if !f.healthy.Load() {
		u.dropPending()
		return
	}
	// Not bounded by f.ctx: Close waits for this write rather than cut it.
	ctx, cancel := context.WithTimeout(context.Background(), f.closeTimeout())
	defer cancel()
	if err := u.flush(ctx, firsts); err != nil {
		_ = f.failed("writing the state of "+u.name, err)
	}
}

// recover restores the shared state when it can: after a (re)connection
// it rebuilds the watcher; once the watcher has caught up and a write
// goes through within Options.Wait, the Fleet is healthy again.
func (f *Fleet) recover() {
	if f.healthy.Load() || f.closing.Load() || f.nc.Status() != nats.CONNECTED {
		return
	}
	f.mu.Lock()
	due := f.resyncDue
	ready := f.watcher != nil && f.synced == f.epoch.Load()
	quiet := time.Now().Before(f.quietTill)
	f.mu.Unlock()
	if due {
		f.resync()
		return // the watcher's catching up wakes the maintainer again
	}
	if !ready || quiet || f.heartbeat() != nil {
		return
	}
	f.countProcesses()
	if f.healthy.CompareAndSwap(false, true) {
		f.opts.Logger.Info("fleet: using the shared upstream state",
			slog.String("process", f.opts.Process), slog.Int("processes", f.Processes()))
	}
}

// resync starts a new epoch: it forgets the mirrored state, makes sure
// the bucket exists (a restarted server may have lost it) and starts a
// watcher, which replays the latest value of every key.
func (f *Fleet) resync() {
	f.mu.Lock()
	old := f.watcher
	f.watcher, f.resyncDue = nil, false
	epoch := f.epoch.Add(1)
	clear(f.beats)
	clear(f.heard)
	ups := make([]*upstream, 0, len(f.upstreams))
	for _, u := range f.upstreams {
		ups = append(ups, u)
	}
	f.mu.Unlock()
	if old != nil {
		_ = old.Stop()
	}
	for _, u := range ups {
		u.reset()
	}
	ctx, cancel := context.WithTimeout(f.ctx, max(10*f.opts.Wait, 2*time.Second))
	defer cancel()
	kv, err := topology.EnsureUpstreams(ctx, f.js, f.opts.Topology)
	var w jetstream.KeyWatcher
	if err == nil {
		w, err = kv.WatchAll(f.ctx)
	}
	if err != nil {
		f.mu.Lock()
		f.resyncDue = true
		f.mu.Unlock()
		f.opts.Logger.Debug("fleet: resync failed; retrying", slog.Any("error", err))
		return
	}
	f.kv.Store(&kvRef{kv: kv})
	f.mu.Lock()
	f.watcher = w
	f.mu.Unlock()
	f.wg.Go(func() { f.watch(w, epoch) })
}

// watch applies the watcher's entries of epoch to the mirrors until the
// watcher ends or the Fleet closes.
func (f *Fleet) watch(w jetstream.KeyWatcher, epoch uint64) {
	for {
		select {
		case <-f.ctx.Done():
			return
		case e, ok := <-w.Updates():
			switch {
			case !ok:
				if f.epoch.Load() == epoch {
					f.degrade("the watcher of "+names.UpstreamsBucket+" ended", true)
				}
				return
			case e == nil: // caught up
				f.mu.Lock()
				if f.epoch.Load() == epoch {
					f.synced = epoch
				}
				f.mu.Unlock()
				f.wake()
			default:
				f.apply(e, epoch)
			}
		}
	}
}

// apply mirrors one entry.
func (f *Fleet) apply(e jetstream.KeyValueEntry, epoch uint64) {
	kind, name, ok := parseKey(e.Key())
	if !ok {
		return
	}
	if kind != names.UpstreamProcess {
		f.upstream(name).apply(kind, e, epoch)
		return
	}
	f.mu.Lock()
	if f.epoch.Load() == epoch {
		rec, ok := decode(e.Value(), (*processRecord).valid)
		if ok && e.Operation() == jetstream.KeyValuePut {
			heard := time.Now()
			if f.synced != epoch {
				// Replayed: it may be the last heartbeat of a process long
				// gone; it is as old as the clocks say.
				heard = heard.Add(-max(0, f.opts.Now().Sub(rec.Heartbeat)))
			}
			f.beats[name], f.heard[name] = rec.Heartbeat, heard
		} else {
			delete(f.beats, name)
			delete(f.heard, name)
		}
	}
	f.mu.Unlock()
	if f.healthy.Load() {
		f.countProcesses()
	}
}

// heartbeat writes this process's heartbeat within Options.Wait.
func (f *Fleet) heartbeat() error {
	kv := f.bucket()
	if kv == nil {
		return errNoBucket
	}
	now := f.opts.Now()
	host, _ := os.Hostname()
	rec := processRecord{V: recordVersion, Process: f.opts.Process, Host: host, PID: os.Getpid(), Started: f.start, Heartbeat: now}
	ctx, cancel := f.withWait()
	defer cancel()
	if _, err := kv.Put(ctx, key(names.UpstreamProcess, f.opts.Process), mustJSON(rec)); err != nil {
		return f.failed("heartbeat", err)
	}
	return nil
}

// countProcesses updates the count of live processes: those whose
// heartbeat is at most three heartbeats old, this one included.
func (f *Fleet) countProcesses() {
	now := f.opts.Now()
	f.mu.Lock()
	n := 1
	for p, t := range f.beats {
		if p != f.opts.Process && now.Sub(t) <= 3*f.opts.Heartbeat {
			n++
		}
	}
	f.mu.Unlock()
	f.processes.Store(int64(n))
}
