package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentledger/ledger"
)

// Two processes of a fleet share one breaker per upstream: process A's
// failures open the circuit, and process B, whose own calls succeed, is
// refused from then on without calling the provider (its event says
// circuit_open). Without WithFleetLimits, B would never be refused.
func ExampleWithFleetLimits() {
	srv := startServer()
	defer srv.Shutdown()
	ctx := context.Background()

	process := func(name string) (*ledger.Middleware, func()) {
		conn, err := ledger.Connect(ctx, ledger.WithURL(srv.URL()))
		if err != nil {
			panic(err)
		}
		pub, err := ledger.NewPublisher(ctx, conn.JetStream(), ledger.WithCreateStream(ledger.StreamConfig{}))
		if err != nil {
			panic(err)
		}
		mw, err := ledger.NewMiddleware(pub,
			ledger.WithPolicy(ledger.Policy{MaxRetries: 0, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond, HintCap: time.Second}),
			ledger.WithBreaker(ledger.BreakerConfig{FailureThreshold: 2, Cooldown: time.Minute}),
			ledger.WithClassifiers(ledger.ClassifierFunc(func(err error, now time.Time) (ledger.Classification, bool) {
				return ledger.Classification{Kind: ledger.KindOverloaded, Status: 529, Retryable: true}, errors.Is(err, errBusy)
			})),
			ledger.WithFleetLimits(conn, ledger.FleetConfig{Process: name}))
		if err != nil {
			panic(err)
		}
		return mw, func() { mw.Close(); _, _ = pub.Close(ctx); conn.Close() }
	}
	a, closeA := process("a")
	defer closeA()
	b, closeB := process("b")
	defer closeB()

	call := ledger.Call{SessionID: "sess-1", Provider: "anthropic", Model: "claude-sonnet-4-5"}
	overloaded := func(ctx context.Context, _ ledger.Attempt) (string, ledger.Report, error) {
		return "", ledger.Report{}, errBusy
	}
	for range 2 {
		_, err := ledger.Do(ctx, a, call, overloaded)
		fmt.Println("a:", err.(*ledger.CallError).Reason)
	}
	// The open state reaches b through NATS within milliseconds. b's own
	// calls succeed until then: b alone would never open its circuit.
	healthy := func(ctx context.Context, _ ledger.Attempt) (string, ledger.Report, error) {
		return "hi", ledger.Report{Usage: ledger.Usage{InputTokens: 10, OutputTokens: 2}}, nil
	}
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if _, err = ledger.Do(ctx, b, call, healthy); errors.Is(err, ledger.ErrCircuitOpen) {
			break
		}
	}
	fmt.Println("b refused:", errors.Is(err, ledger.ErrCircuitOpen))
	// Output:
	// a: retries_exhausted
	// a: retries_exhausted
	// b refused: true
}
