package projection

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrConflict means a compare-and-set write found another revision than the
// one this aggregator last read or wrote: another writer touched the key.
var ErrConflict = errors.New("projection: write conflict")

// put is one compare-and-set write: key must be at revision rev (0: absent).
type put struct {
	key   string
	value []byte
	rev   uint64 // expected revision; replaced by the new one once acked
}

// bucket reads and writes one KV bucket. Reads are KV gets; writes are
// pipelined compare-and-set publishes to the bucket's subjects, so a batch
// costs one round trip per bucket, not one per key.
type bucket struct {
	js     jetstream.JetStream
	kv     jetstream.KeyValue
	prefix string // "$KV.<bucket>."
}

func newBucket(js jetstream.JetStream, kv jetstream.KeyValue) *bucket {
	return &bucket{js: js, kv: kv, prefix: "$KV." + kv.Bucket() + "."}
}

// get returns the value and revision of key, or nil, 0 when it is absent.
func (b *bucket) get(ctx context.Context, key string) ([]byte, uint64, error) {
	e, err := b.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("projection: reading %s/%s: %w", b.kv.Bucket(), key, err)
	}
	return e.Value(), e.Revision(), nil
}

// putAll writes every put with compare-and-set, pipelined, and waits for
// every acknowledgement. On success each put's rev is its new revision. On
// failure some puts may have landed and others not; the caller treats the
// batch as failed and starts again from its checkpoint.
func (b *bucket) putAll(ctx context.Context, puts []put) error {
	futures := make([]jetstream.PubAckFuture, len(puts))
	for i := range puts {
		m := nats.NewMsg(b.prefix + puts[i].key)
		m.Data = puts[i].value
		f, err := b.js.PublishMsgAsync(m, jetstream.WithExpectLastSequencePerSubject(puts[i].rev))
		if err != nil {
			return fmt.Errorf("projection: writing %s/%s: %w", b.kv.Bucket(), puts[i].key, err)
		}
		futures[i] = f
	}
	var first error
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			puts[i].rev = ack.Sequence
		case err := <-f.Err():
			if first == nil {
				first = b.writeErr(puts[i].key, err)
			}
		case <-ctx.Done():
			return fmt.Errorf("projection: waiting for writes to %s: %w", b.kv.Bucket(), ctx.Err())
		}
	}
	return first
}

func (b *bucket) writeErr(key string, err error) error {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
		return fmt.Errorf("%w on %s/%s: %v", ErrConflict, b.kv.Bucket(), key, err)
	}
	return fmt.Errorf("projection: writing %s/%s: %w", b.kv.Bucket(), key, err)
}
