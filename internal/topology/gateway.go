package topology

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/names"
)

// DefaultGatewayAttemptsTTL is how long the gateway remembers a request's
// attempt numbers after its last call: a client retry of the request
// after that starts again from 0.
const DefaultGatewayAttemptsTTL = 7 * 24 * time.Hour

// EnsureGatewayAttempts creates the gateway's bucket when it is missing
// (file storage, one revision per key, entries expiring ttl after their
// last write) and returns it. An existing bucket is used as it is.
func EnsureGatewayAttempts(ctx context.Context, js jetstream.JetStream, c Config, ttl time.Duration) (jetstream.KeyValue, error) {
	c, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	if ttl < 0 {
		return nil, fmt.Errorf("%w: gateway attempts TTL %s must not be negative (0 keeps them forever)", ErrInvalidConfig, ttl)
	}
	kv, err := js.KeyValue(ctx, names.GatewayAttemptsBucket)
	if err == nil {
		return kv, nil
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("topology: looking up bucket %s: %w", names.GatewayAttemptsBucket, err)
	}
	kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      names.GatewayAttemptsBucket,
		Description: "ledger gateway: the next attempt number of each request a client named",
		History:     1,
		TTL:         ttl,
		Storage:     jetstream.FileStorage,
		Replicas:    c.Replicas,
	})
	if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return js.KeyValue(ctx, names.GatewayAttemptsBucket)
	}
	if err != nil {
		return nil, fmt.Errorf("topology: creating bucket %s: %w", names.GatewayAttemptsBucket, err)
	}
	return kv, nil
}
