package projection_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/projection"
	"github.com/agentledger/ledger/internal/replay"
)

// Issue 15: rebuilds and the live aggregators, each frozen and resumed at
// random points while events are published; the ledger ends equal to the
// model and verify says identical. LEDGER_CHAOS_SEED picks the first seed
// (default 1), LEDGER_CHAOS_ROUNDS how many seeds to run from it (default
// 1), LEDGER_CHAOS_REBUILDS how many rebuilds (default 2).
func TestRandomRebuildsAndPauses(t *testing.T) {
	seed, rounds := envUint(t, "LEDGER_CHAOS_SEED", 1), envUint(t, "LEDGER_CHAOS_ROUNDS", 1)
	rebuilds := int(envUint(t, "LEDGER_CHAOS_REBUILDS", 2))
	for s := seed; s < seed+rounds; s++ {
		t.Run(fmt.Sprint("seed", s), func(t *testing.T) {
			projection.RandomRebuilds(t, s, rebuilds, 80, func(ctx context.Context, js jetstream.JetStream) error {
				d, err := replay.Verify(ctx, js, replay.Options{})
				if err != nil {
					return err
				}
				if !d.Identical() {
					return fmt.Errorf("verify: the ledger is not identical to its replay: %+v", d)
				}
				return nil
			})
		})
	}
}

func envUint(t *testing.T, name string, def uint64) uint64 {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseUint(v, 10, 64)
	require.NoError(t, err, "%s=%q must be a number", name, v)
	return n
}
