package gateway

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// KVAttempts is an AttemptNumbers in a JetStream KV bucket
// (names.GatewayAttemptsBucket), shared by every gateway replica: the
// value of a request's key is the next attempt number no reservation has
// had, and every change is a compare-and-set on the key's revision, so
// that two replicas never hand out the same number.
type KVAttempts struct {
	kv jetstream.KeyValue
}

// NewKVAttempts returns the AttemptNumbers of bucket kv.
func NewKVAttempts(kv jetstream.KeyValue) *KVAttempts { return &KVAttempts{kv: kv} }

// maxCASTries bounds the compare-and-set rounds of one reservation; each
// lost round means another call reserved numbers of the same request at
// that moment, so the next round waits a little, jittered, longer each
// time (up to maxCASWait).
const (
	maxCASTries = 64
	maxCASWait  = 20 * time.Millisecond
)

// casWait is the wait before compare-and-set round n (from 1).
func casWait(n int) time.Duration {
	d := min(time.Duration(1<<min(n, 10))*50*time.Microsecond, maxCASWait)
	return d/2 + rand.N(d/2+1)
}

// Reserve implements AttemptNumbers: a create when the request is new
// (one round trip), else a read and a compare-and-set.
func (k *KVAttempts) Reserve(ctx context.Context, requestID string, count int) (Reservation, error) {
	if err := checkRoom(0, count); err != nil {
		return Reservation{}, err
	}
	rev, err := k.kv.Create(ctx, requestID, strconv.AppendInt(nil, int64(count), 10))
	if err == nil {
		return Reservation{First: 0, Count: count, Token: rev}, nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return Reservation{}, fmt.Errorf("attempt numbers of %s: %w", requestID, err)
	}
	for n := range maxCASTries {
		if n > 0 {
			select {
			case <-ctx.Done():
				return Reservation{}, fmt.Errorf("attempt numbers of %s: %w", requestID, context.Cause(ctx))
			case <-time.After(casWait(n)):
			}
		}
		e, err := k.kv.Get(ctx, requestID)
		if err != nil {
			return Reservation{}, fmt.Errorf("attempt numbers of %s: %w", requestID, err)
		}
		first, err := strconv.Atoi(string(e.Value()))
		if err != nil || first < 0 {
			return Reservation{}, fmt.Errorf("attempt numbers of %s: the bucket holds %q, not a number", requestID, e.Value())
		}
		if err := checkRoom(first, count); err != nil {
			return Reservation{}, err
		}
		rev, err := k.kv.Update(ctx, requestID, strconv.AppendInt(nil, int64(first+count), 10), e.Revision())
		if err == nil {
			return Reservation{First: first, Count: count, Token: rev}, nil
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return Reservation{}, fmt.Errorf("attempt numbers of %s: %w", requestID, err)
		}
	}
	return Reservation{}, fmt.Errorf("attempt numbers of %s: %d concurrent reservations won over this one", requestID, maxCASTries)
}

// Release implements AttemptNumbers: a compare-and-set against the
// reservation's revision, so that it gives nothing back once another
// reservation followed.
func (k *KVAttempts) Release(ctx context.Context, requestID string, r Reservation, used int) error {
	if used >= r.Count {
		return nil
	}
	_, err := k.kv.Update(ctx, requestID, strconv.AppendInt(nil, int64(r.First+max(used, 0)), 10), r.Token)
	if err != nil && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return fmt.Errorf("attempt numbers of %s: %w", requestID, err)
	}
	return nil
}
