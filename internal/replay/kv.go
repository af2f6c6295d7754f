package replay

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// kvEntry is the current value of one key of a KV bucket.
type kvEntry struct {
	key     string
	value   []byte
	deleted bool   // a delete or purge marker
	seq     uint64 // its sequence in the bucket's stream
}

// eachKV calls fn with the current value of every key of the KV bucket
// whose stream is stream (subjects prefix<key>), streaming: nothing is
// held. The buckets keep one revision per key, so reading the stream from
// its start gives each key's current value once; a key rewritten during
// the read may come twice (the later is newer), and one rewritten before
// the read reaches it comes once, at its new place. It reads until it has
// passed the stream's last sequence at the start and has nothing pending,
// so every key that existed at the start comes at least once. A missing
// stream has no keys.
func eachKV(ctx context.Context, js jetstream.JetStream, stream, prefix string, fn func(kvEntry) error) error {
	s, err := js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("replay: opening %s: %w", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return fmt.Errorf("replay: reading %s: %w", stream, err)
	}
	if info.State.Msgs == 0 {
		return nil
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return fmt.Errorf("replay: reading %s: %w", stream, err)
	}
	it, err := readPull(cons, js.Conn().MaxPayload(), 1024)
	if err != nil {
		return fmt.Errorf("replay: reading %s: %w", stream, err)
	}
	defer it.stop()
	for {
		m, err := it.next(ctx)
		if err != nil {
			return fmt.Errorf("replay: reading %s: %w", stream, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("replay: a message without metadata: %w", err)
		}
		key, ok := strings.CutPrefix(m.Subject(), prefix)
		if !ok {
			return fmt.Errorf("replay: %s holds subject %q", stream, m.Subject())
		}
		op := m.Headers().Get("KV-Operation")
		e := kvEntry{key: key, value: m.Data(), deleted: op == "DEL" || op == "PURGE", seq: md.Sequence.Stream}
		if e.deleted {
			e.value = nil
		}
		if err := fn(e); err != nil {
			return err
		}
		if md.NumPending == 0 {
			// The count can lag behind deletes of messages not yet
			// delivered (a key rewritten meanwhile); the stream itself
			// says whether anything comes after.
			more, err := anyAfter(ctx, s, prefix+">", md.Sequence.Stream)
			if err != nil || !more {
				return err
			}
		}
	}
}

// anyAfter reports whether stream holds a message on subject after
// sequence seq.
func anyAfter(ctx context.Context, stream jetstream.Stream, subject string, seq uint64) (bool, error) {
	_, err := stream.GetMsg(ctx, seq+1, jetstream.WithGetMsgSubject(subject))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("replay: reading %s: %w", stream.CachedInfo().Config.Name, err)
	}
	return true, nil
}
