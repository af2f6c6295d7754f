package projection

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// RandomRebuilds runs the randomized rebuild test (randomRebuilds) for
// package projection_test, which can import package replay for verify.
func RandomRebuilds(t *testing.T, seed uint64, rebuilds, requests int, verify func(context.Context, jetstream.JetStream) error) {
	randomRebuilds(t, chaosConfig{Seed: seed, Rebuilds: rebuilds, Requests: requests}, verify)
}
