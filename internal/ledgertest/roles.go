package ledgertest

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/topology"
)

// StartRoles runs a server configured by the shipped roles example
// (natstest.StartRoles) with LEDGER_ATTEMPTS created by the aggregator
// role, as a deployment has it before publishers and gateways start.
func StartRoles(t testing.TB, options ...natstest.Option) *natstest.Server {
	t.Helper()
	srv := natstest.StartRoles(t, options...)
	_, js := srv.ConnectAs(t, "aggregator")
	if _, err := topology.EnsureAttempts(t.Context(), js, topology.Config{}); err != nil {
		t.Fatalf("ledgertest: %v", err)
	}
	return srv
}

// StartStream runs an embedded JetStream server (natstest.StartJS) with
// LEDGER_ATTEMPTS created, and returns the connection's JetStream.
func StartStream(t testing.TB, options ...natstest.Option) jetstream.JetStream {
	t.Helper()
	_, _, js := natstest.StartJS(t, options...)
	if _, err := topology.EnsureAttempts(t.Context(), js, topology.Config{}); err != nil {
		t.Fatalf("ledgertest: %v", err)
	}
	return js
}
