package topology

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/names"
)

// UpstreamsMaxAge is how long a record of ledger_upstreams outlives its
// last write: the state is soft, and an upstream nobody called for an hour
// starts afresh.
const UpstreamsMaxAge = time.Hour

// UpstreamsBucketConfig is the configuration of ledger_upstreams: one
// revision per key in memory (the state is soft and rebuilt when lost; a
// write in the call path must be quick), records expire after
// UpstreamsMaxAge.
func UpstreamsBucketConfig(c Config) (jetstream.KeyValueConfig, error) {
	c, err := c.withDefaults()
	if err != nil {
		return jetstream.KeyValueConfig{}, err
	}
	return jetstream.KeyValueConfig{
		Bucket:      names.UpstreamsBucket,
		Description: "Usage ledger: the fleet's shared state per upstream (breakers, rate limits, retry budgets) and its live processes. Soft state.",
		History:     1,
		TTL:         UpstreamsMaxAge,
		Storage:     jetstream.MemoryStorage,
		Replicas:    c.Replicas,
	}, nil
}

// EnsureUpstreams creates ledger_upstreams when it is missing and returns
// it; an existing bucket is used as it is.
func EnsureUpstreams(ctx context.Context, js jetstream.JetStream, c Config) (jetstream.KeyValue, error) {
	cfg, err := UpstreamsBucketConfig(c)
	if err != nil {
		return nil, err
	}
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if err == nil {
		return kv, nil
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("topology: looking up bucket %s: %w", cfg.Bucket, err)
	}
	kv, err = js.CreateKeyValue(ctx, cfg)
	if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return js.KeyValue(ctx, cfg.Bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("topology: creating bucket %s: %w", cfg.Bucket, err)
	}
	return kv, nil
}
