package replay

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/names"
)

// liveWindow reads the live request records in the order they were
// written, streaming, a little ahead of the replay. The aggregator writes
// a request in the batch of its last event that changed it, batches in
// stream order, so the live records come in nearly the order in which the
// replay finishes requests: a request finishing is found in the window,
// read at the cost of a consumer's delivery rather than a direct get.
// The window is bounded: the records with the oldest watermark leave it
// first, and a request not found in it is read by a direct get.
type liveWindow struct {
	in      <-chan kvEntry
	errc    <-chan error
	stop    func()
	recs    map[string]windowed
	bound   int
	ahead   uint64 // how far past the replay the window reads
	lastW   uint64 // the watermark of the last record read
	done    bool
	evicted uint64
}

type windowed struct {
	value     []byte
	deleted   bool
	watermark uint64
}

// openWindow starts reading ledger_requests on its own goroutine.
func openWindow(ctx context.Context, js jetstream.JetStream, bound int, ahead uint64) *liveWindow {
	in, errc := make(chan kvEntry, 1024), make(chan error, 1)
	rctx, cancel := context.WithCancel(ctx)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		defer close(in)
		errc <- eachKV(rctx, js, "KV_"+names.RequestsBucket, liveRequestPrefix, func(e kvEntry) error {
			e.value = append([]byte(nil), e.value...)
			select {
			case in <- e:
				return nil
			case <-rctx.Done():
				return rctx.Err()
			}
		})
	}()
	return &liveWindow{in: in, errc: errc, stop: func() { cancel(); <-finished }, recs: map[string]windowed{}, bound: bound, ahead: ahead}
}

// fill reads records until one written past pos+ahead has been read, the
// window holds a quarter of its bound, or there are no more.
func (w *liveWindow) fill(ctx context.Context, pos uint64) error {
	for !w.done && (w.lastW <= pos+w.ahead || len(w.recs) < w.bound/4) {
		var e kvEntry
		var ok bool
		select {
		case e, ok = <-w.in:
		case <-ctx.Done():
			return ctx.Err()
		}
		if !ok {
			w.done = true
			if err := <-w.errc; err != nil && !errors.Is(err, context.Canceled) {
				return fmt.Errorf("replay: reading %s: %w", names.RequestsBucket, err)
			}
			return nil
		}
		rec := windowed{value: e.value, deleted: e.deleted}
		if !e.deleted {
			rec.watermark, _ = watermark(e.value)
			w.lastW = rec.watermark
		}
		w.recs[e.key] = rec
		if len(w.recs) > w.bound {
			w.evict()
		}
	}
	return nil
}

// evict drops the half of the window written longest ago.
func (w *liveWindow) evict() {
	marks := make([]uint64, 0, len(w.recs))
	for _, r := range w.recs {
		marks = append(marks, r.watermark)
	}
	slices.Sort(marks)
	cut := marks[len(marks)/2]
	for k, r := range w.recs {
		if r.watermark < cut || (r.watermark == cut && len(w.recs) > w.bound/2) {
			delete(w.recs, k)
			w.evicted++
		}
	}
}

// take removes and returns the record of id, when the window holds it.
func (w *liveWindow) take(id string) (windowed, bool) {
	r, ok := w.recs[id]
	if ok {
		delete(w.recs, id)
	}
	return r, ok
}
