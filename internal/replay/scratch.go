package replay

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"

	"github.com/agentledger/ledger/internal/names"
)

// Verify keeps what does not fit its memory bounds in scratch KV buckets
// on the server, created only when needed: ledger_verify_<ULID>_<use>.
// The ULID makes two verifies at once use distinct buckets, and the prefix
// cannot meet a rebuild's (ledger_rebuild_*) or the live ledger's. Verify
// deletes them when it ends; a verify that died leaves them, so each
// bucket holds a heartbeat key that its verify rewrites, and a verify that
// creates buckets first deletes those whose heartbeat is stale.
const (
	heartbeatEvery = 20 * time.Second
	heartbeatStale = 2 * time.Minute
)

// scratch owns one verify's scratch buckets.
type scratch struct {
	js      jetstream.JetStream
	name    string // ledger_verify_<ULID>
	now     func() time.Time
	mu      sync.Mutex
	buckets []*scratchKV
	stop    chan struct{}
	done    chan struct{}
}

func newScratch(js jetstream.JetStream) *scratch {
	return &scratch{js: js, name: names.VerifyScratchPrefix + ulid.Make().String(), now: time.Now}
}

// scratchKV is one scratch bucket.
type scratchKV struct {
	s      *scratch
	kv     jetstream.KeyValue
	stream string // KV_<bucket>
	prefix string // $KV.<bucket>.
}

// bucket creates the scratch bucket for use. The first one removes stale
// scratch buckets of dead verifies and starts the heartbeat.
func (s *scratch) bucket(ctx context.Context, use string) (*scratchKV, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.buckets) == 0 {
		if err := removeStale(ctx, s.js, s.now()); err != nil {
			return nil, err
		}
	}
	name := s.name + "_" + use
	kv, err := s.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: name, Description: "aggregator verify: scratch space, deleted when verify ends", History: 1, Storage: jetstream.FileStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("replay: creating scratch bucket %s: %w", name, err)
	}
	b := &scratchKV{s: s, kv: kv, stream: "KV_" + name, prefix: "$KV." + name + "."}
	if err := b.beat(ctx); err != nil {
		return nil, err
	}
	s.buckets = append(s.buckets, b)
	if len(s.buckets) == 1 {
		s.stop, s.done = make(chan struct{}), make(chan struct{})
		go s.heartbeat()
	}
	return b, nil
}

func (b *scratchKV) beat(ctx context.Context) error {
	_, err := b.kv.Put(ctx, names.VerifyHeartbeatKey, []byte(strconv.FormatInt(b.s.now().Unix(), 10)))
	if err != nil {
		return fmt.Errorf("replay: writing scratch bucket %s: %w", b.kv.Bucket(), err)
	}
	return nil
}

func (s *scratch) heartbeat() {
	defer close(s.done)
	t := time.NewTicker(heartbeatEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		buckets := append([]*scratchKV(nil), s.buckets...)
		s.mu.Unlock()
		for _, b := range buckets {
			ctx, cancel := context.WithTimeout(context.Background(), heartbeatEvery)
			_ = b.beat(ctx) // a missed beat is retried; stale takes six
			cancel()
		}
	}
}

// close deletes every scratch bucket; it is called once, when verify ends.
func (s *scratch) close(ctx context.Context) error {
	s.mu.Lock()
	buckets := s.buckets
	s.buckets = nil
	s.mu.Unlock()
	if s.stop != nil {
		close(s.stop)
		<-s.done
	}
	var first error
	for _, b := range buckets {
		if err := s.js.DeleteKeyValue(ctx, b.kv.Bucket()); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) && first == nil {
			first = fmt.Errorf("replay: deleting scratch bucket %s: %w", b.kv.Bucket(), err)
		}
	}
	return first
}

// removeStale deletes the scratch buckets of verifies that stopped
// beating.
func removeStale(ctx context.Context, js jetstream.JetStream, now time.Time) error {
	lister := js.KeyValueStoreNames(ctx)
	var stale []string
	for name := range lister.Name() {
		if !strings.HasPrefix(name, names.VerifyScratchPrefix) {
			continue
		}
		kv, err := js.KeyValue(ctx, name)
		if err != nil {
			continue
		}
		if !staleScratch(ctx, kv, now) {
			continue
		}
		stale = append(stale, name)
	}
	if err := lister.Error(); err != nil {
		return fmt.Errorf("replay: listing buckets: %w", err)
	}
	for _, name := range stale {
		if err := js.DeleteKeyValue(ctx, name); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
			return fmt.Errorf("replay: deleting stale scratch bucket %s: %w", name, err)
		}
	}
	return nil
}

// staleScratch reports whether a scratch bucket's verify stopped beating:
// no heartbeat for heartbeatStale, in a bucket created before that.
func staleScratch(ctx context.Context, kv jetstream.KeyValue, now time.Time) bool {
	e, err := kv.Get(ctx, names.VerifyHeartbeatKey)
	if err == nil {
		at, perr := strconv.ParseInt(string(e.Value()), 10, 64)
		return perr != nil || now.Sub(time.Unix(at, 0)) > heartbeatStale
	}
	if !errors.Is(err, jetstream.ErrKeyNotFound) {
		return false
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return false
	}
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	return ok && now.Sub(bs.StreamInfo().Created) > heartbeatStale
}

// getMany returns the values of the keys the bucket holds.
func (b *scratchKV) getMany(ctx context.Context, keys []string) (map[string][]byte, error) {
	subjects := make([]string, len(keys))
	for i, k := range keys {
		subjects[i] = b.prefix + k
	}
	got, err := multiLast(ctx, b.s.js.Conn(), b.stream, subjects, 0, 0)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]byte, len(got))
	for subj, m := range got {
		if !m.deleted {
			out[strings.TrimPrefix(subj, b.prefix)] = m.data
		}
	}
	return out, nil
}

// kvPut is one write to a scratch bucket; a nil value deletes the key.
type kvPut struct {
	key   string
	value []byte
}

// putMany writes every put, pipelined, and waits for all of them.
func (b *scratchKV) putMany(ctx context.Context, puts []kvPut) error {
	futures := make([]jetstream.PubAckFuture, 0, len(puts))
	for _, p := range puts {
		m := nats.NewMsg(b.prefix + p.key)
		m.Data = p.value
		if p.value == nil {
			m.Header.Set("KV-Operation", "DEL")
		}
		f, err := b.s.js.PublishMsgAsync(m)
		if err != nil {
			return fmt.Errorf("replay: writing scratch bucket %s: %w", b.kv.Bucket(), err)
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("replay: writing scratch bucket %s: %w", b.kv.Bucket(), err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// each calls fn with every key and value the bucket holds (but the
// heartbeat). Nothing may write to the bucket meanwhile.
func (b *scratchKV) each(ctx context.Context, fn func(key string, value []byte) error) error {
	return eachKV(ctx, b.s.js, b.stream, b.prefix, func(e kvEntry) error {
		if e.deleted || e.key == names.VerifyHeartbeatKey {
			return nil
		}
		return fn(e.key, e.value)
	})
}
