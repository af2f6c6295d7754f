package projection

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// ReadAll calls fn with the current value of every key of KV bucket name
// (none when the bucket does not exist), in key order, while writers may
// keep writing. Unlike a KV watcher, it never misses a key that existed
// when it started: it lists the bucket's subjects first (a consistent list
// from the server), then reads their last values with batched direct gets.
// Each value is whole, but values of different keys may be from different
// moments; deleted keys are skipped.
func ReadAll(ctx context.Context, js jetstream.JetStream, name string, fn func(key string, value []byte) error) error {
	return readKeys(ctx, js, name, nil, fn)
}

// readKeys is ReadAll of the keys keep accepts (nil: all): the others are
// not read.
func readKeys(ctx context.Context, js jetstream.JetStream, name string, keep func(key string) bool, fn func(key string, value []byte) error) error {
	kv, err := js.KeyValue(ctx, name)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("projection: opening %s: %w", name, err)
	}
	b, err := newBucket(ctx, js, kv)
	if err != nil {
		return err
	}
	info, err := b.stream.Info(ctx, jetstream.WithSubjectFilter(b.prefix+">"))
	if err != nil {
		return fmt.Errorf("projection: listing %s: %w", name, err)
	}
	keys := make([]string, 0, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		if k := strings.TrimPrefix(subj, b.prefix); keep == nil || keep(k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	const chunk = 16 * maxMultiGet
	for i := 0; i < len(keys); i += chunk {
		part := keys[i:min(i+chunk, len(keys))]
		got, err := b.getMany(ctx, part)
		if err != nil {
			return err
		}
		for _, k := range part {
			if st, ok := got[k]; ok && st.value != nil {
				if err := fn(k, st.value); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
