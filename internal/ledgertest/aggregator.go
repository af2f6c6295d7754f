package ledgertest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/projection"
)

// RunAggregator runs a live aggregator on js until the returned stop is
// called (also at cleanup); stop fails the test if Run returned an error.
// A zero LeaseTTL is set to 300ms, so that tests with a rebuild are quick.
func RunAggregator(t testing.TB, js jetstream.JetStream, cfg projection.Config) (stop func()) {
	t.Helper()
	cfg.JS = js
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = 300 * time.Millisecond
	}
	agg, err := projection.New(cfg)
	if err != nil {
		t.Fatalf("ledgertest: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- agg.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("ledgertest: the aggregator stopped with %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// WaitCaughtUp waits (up to 30s) until the live ledger has applied every
// event in the stream.
func WaitCaughtUp(t testing.TB, js jetstream.JetStream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, _, err := projection.WaitCaughtUp(ctx, js, 5*time.Millisecond); err != nil {
		t.Fatalf("ledgertest: waiting for the ledger to catch up: %v", err)
	}
}
