package main

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/ledgertest"
	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/pricing"
	"github.com/agentledger/ledger/internal/projection"
	"github.com/agentledger/ledger/internal/topology"
)

// `aggregator prices` and `prices load` of a build whose default catalog
// differs from the one the ledger was priced with say what the
// aggregator does: this build's default would be made current at the
// next term; a loaded catalog that changes a past price leaves the
// ledger on its version until a rebuild. Every stored version is listed
// in its resolved form.
func TestPricesSayWhatTheAggregatorDoes(t *testing.T) {
	url, js := streamWith(t, rand.New(rand.NewPCG(7, 8)), ledgertest.Spec{Sessions: 2, Calls: 10})
	old, err := pricing.Parse([]byte(`{"entries": [{"provider": "openai", "model": "m", "effective_from": "2020-01-01",
 "input": "1", "output": "1", "source": "test", "read_on": "2026-12-04"}]}`))
	require.NoError(t, err)
	stop := ledgertest.RunAggregator(t, js, projection.Config{Catalog: old})
	ledgertest.WaitCaughtUp(t, js)
	stop()

	code, out, stderr := run(t, "prices", "--nats-url", url)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "ledger:  "+old.Version())
	require.Contains(t, out, "the ledger prices with the current catalog")
	require.Contains(t, out, "this build's default catalog, merged with the current user's file if any, is catalog "+pricing.Default().Version())
	require.Contains(t, out, "resolved")

	file := filepath.Join(t.TempDir(), "fix.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"entries": [{"provider": "openai", "model": "m", "effective_from": "2020-01-01",
 "input": "2", "output": "1", "source": "test", "read_on": "2026-12-04"}]}`), 0o600))
	code, out, stderr = run(t, "prices", "load", "--nats-url", url, file)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "changes the price of attempts the ledger has applied")
	require.Contains(t, out, "the ledger keeps pricing with catalog "+old.Version())
}

// streamWith starts a server with the attempt stream holding a generated
// workload, and returns its URL.
func streamWith(t *testing.T, rng *rand.Rand, s ledgertest.Spec) (string, jetstream.JetStream) {
	t.Helper()
	srv, _, js := natstest.StartJS(t)
	_, err := topology.EnsureAttempts(context.Background(), js, topology.Config{})
	require.NoError(t, err)
	ledgertest.Publish(t, js, ledgertest.Generate(rng, s).Messages)
	return srv.URL(), js
}
