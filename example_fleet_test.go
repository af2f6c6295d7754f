package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/agentledger/ledger"
)

// Two processes of a fleet share one breaker per upstream: process A's
// failures open the circuit, process B is told (its OnStateChange, fed by
// the fleet's state on NATS), reads it (BreakerState), and is refused
// from then on without calling the provider, although its own calls
// succeed. Without WithFleetLimits, B would never be refused.
func ExampleWithFleetLimits() {
	// The NATS server (with JetStream) that the fleet's processes share.
	dir, err := os.MkdirTemp("", "ledger-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		panic(err)
	}
	srv.Start()
	defer srv.Shutdown()
	if !srv.ReadyForConnections(10 * time.Second) {
		panic("the NATS server did not start")
	}
	ctx := context.Background()
	const upstream = "anthropic/claude-sonnet-4-5"

	process := func(name string, onChange func(upstream, from, to string)) (*ledger.Middleware, func()) {
		conn, err := ledger.Connect(ctx, ledger.WithURL(srv.ClientURL()))
		if err != nil {
			panic(err)
		}
		pub, err := ledger.NewPublisher(ctx, conn.JetStream(), ledger.WithCreateStream(ledger.StreamConfig{}))
		if err != nil {
			panic(err)
		}
		mw, err := ledger.NewMiddleware(pub,
			ledger.WithPolicy(ledger.Policy{MaxRetries: 0, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond, HintCap: time.Second}),
			ledger.WithBreaker(ledger.BreakerConfig{FailureThreshold: 2, Cooldown: time.Minute, OnStateChange: onChange}),
			ledger.WithClassifiers(ledger.ClassifierFunc(func(err error, now time.Time) (ledger.Classification, bool) {
				return ledger.Classification{Kind: ledger.KindOverloaded, Status: 529, Retryable: true}, errors.Is(err, errBusy)
			})),
			ledger.WithFleetLimits(conn, ledger.FleetConfig{
				Process: name,
				// Gemini says no limits in its headers: set them (without,
				// the fleet infers one from the 429s).
				Limits:      map[string]ledger.RateLimits{"gemini/gemini-2.5-flash": {RequestsPerMinute: 1000, TokensPerMinute: 4_000_000}},
				RetryBudget: ledger.RetryBudget{Percent: 20, MinPerMinute: 10, Window: time.Minute},
			}))
		if err != nil {
			panic(err)
		}
		return mw, func() { mw.Close(); _, _ = pub.Close(ctx); conn.Close() }
	}
	a, closeA := process("a", nil)
	defer closeA()
	told := make(chan string, 8)
	b, closeB := process("b", func(up, from, to string) { told <- up + ": " + from + " -> " + to })
	defer closeB()

	call := ledger.Call{SessionID: "sess-1", Provider: "anthropic", Model: "claude-sonnet-4-5"}
	overloaded := func(ctx context.Context, _ ledger.Attempt) (string, ledger.Report, error) {
		return "", ledger.Report{}, errBusy
	}
	for range 2 {
		_, err := ledger.Do(ctx, a, call, overloaded)
		fmt.Println("a:", err.(*ledger.CallError).Reason)
	}
	// The open state reaches b through NATS within milliseconds.
	fmt.Println("b told:", <-told)
	fmt.Println("b reads:", b.BreakerState(upstream))
	healthy := func(ctx context.Context, _ ledger.Attempt) (string, ledger.Report, error) {
		return "hi", ledger.Report{Usage: ledger.Usage{InputTokens: 10, OutputTokens: 2}}, nil
	}
	_, err = ledger.Do(ctx, b, call, healthy)
	fmt.Println("b refused:", errors.Is(err, ledger.ErrCircuitOpen))
	// Output:
	// a: retries_exhausted
	// a: retries_exhausted
	// b told: anthropic/claude-sonnet-4-5: closed -> open
	// b reads: open
	// b refused: true
}
