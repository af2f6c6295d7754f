package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

var (
	// errContended: a compare-and-set lost maxCASTries times in a row.
	errContended = errors.New("fleet: the record changed under every attempt to write it")
	// errNoBucket: the bucket is not known yet.
	errNoBucket = errors.New("fleet: no bucket yet")
)

// maxCASTries bounds the compare-and-set loop of one decision.
const maxCASTries = 32

// mirror is the latest known value of one record: from the watcher, a
// read, or this process's own write. rev is the KV revision (0: none
// known); ok is false when the key is absent or its value unreadable.
type mirror[T any] struct {
	rec T
	rev uint64
	ok  bool
}

// store keeps e's value if it is newer than m's.
func (m *mirror[T]) store(rec T, ok bool, rev uint64) {
	if rev > m.rev {
		*m = mirror[T]{rec: rec, rev: rev, ok: ok}
	}
}

// change makes the next record from the current one (exists false: no
// record); write false means there is nothing to write.
type change[T any] func(cur T, exists bool) (next T, write bool, err error)

// cas writes the record at k made by fn from the current one, by
// compare-and-set on its revision, starting from the mirror m (guarded by
// mu) and reading the record again after each conflict. It returns the
// record written, or the current one when fn wrote nothing, and whether it
// wrote.
func cas[T any](ctx context.Context, f *Fleet, k string, m *mirror[T], mu *sync.Mutex, valid func(*T) bool, fn change[T]) (T, bool, error) {
	mu.Lock()
	cur := *m
	mu.Unlock()
	var zero T
	kv := f.bucket()
	if kv == nil {
		return zero, false, errNoBucket
	}
	for range maxCASTries {
		next, write, err := fn(cur.rec, cur.ok)
		if err != nil || !write {
			return cur.rec, false, err
		}
		data := mustJSON(next)
		var rev uint64
		if cur.rev > 0 {
			rev, err = kv.Update(ctx, k, data, cur.rev)
		} else {
			rev, err = kv.Create(ctx, k, data)
		}
		if err == nil {
			f.writes.Add(1)
			mu.Lock()
			m.store(next, true, rev)
			mu.Unlock()
			return next, true, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return zero, false, err
		}
		f.conflicts.Add(1)
		e, err := kv.Get(ctx, k)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			cur = mirror[T]{}
			if e != nil {
				cur.rev = e.Revision() // a delete marker
			}
		case err != nil:
			return zero, false, err
		default:
			rec, ok := decode(e.Value(), valid)
			cur = mirror[T]{rec: rec, rev: e.Revision(), ok: ok}
			mu.Lock()
			m.store(rec, ok, e.Revision())
			mu.Unlock()
		}
	}
	return zero, false, errContended
}

// mustJSON marshals a record; records are plain data and always marshal.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("fleet: a record does not marshal: " + err.Error())
	}
	return b
}
