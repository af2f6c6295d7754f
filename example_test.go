package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/agentledger/ledger"
	"github.com/agentledger/ledger/internal/embedded"
)

// An agent's wiring: connect, publish, wrap each model call in Do. Here
// the "model call" fails once with a retryable error and then succeeds,
// so the call has two attempts and two events.
func Example() {
	srv := startServer() // in production: a NATS server with JetStream, e.g. from NATS_URL
	defer srv.Shutdown()
	ctx := context.Background()

	conn, err := ledger.Connect(ctx, ledger.WithURL(srv.URL()))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	pub, err := ledger.NewPublisher(ctx, conn.JetStream(), ledger.WithCreateStream(ledger.StreamConfig{}))
	if err != nil {
		panic(err)
	}
	mw, err := ledger.NewMiddleware(pub, ledger.WithPolicy(ledger.Policy{
		MaxRetries: 2, BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond, HintCap: time.Second,
	}), ledger.WithClassifiers(ledger.ClassifierFunc(func(err error, now time.Time) (ledger.Classification, bool) {
		if errors.Is(err, errBusy) {
			return ledger.Classification{Kind: ledger.KindOverloaded, Status: 529, Retryable: true}, true
		}
		return ledger.Classification{}, false
	})))
	if err != nil {
		panic(err)
	}

	call := ledger.Call{SessionID: "sess-1", Provider: "anthropic", Model: "claude-sonnet-4-5"}
	answer, err := ledger.Do(ctx, mw, call, func(ctx context.Context, a ledger.Attempt) (string, ledger.Report, error) {
		if a.Number == 0 {
			return "", ledger.Report{}, errBusy
		}
		return "hello", ledger.Report{Usage: ledger.Usage{InputTokens: 500, OutputTokens: 12}}, nil
	})
	fmt.Println(answer, err)

	st, err := pub.Close(ctx) // drains: every event acknowledged
	fmt.Println("events acked:", st.Acked, "undelivered:", st.Undelivered, err)
	fmt.Printf("%+v\n", mw.Stats())
	// Output:
	// hello <nil>
	// events acked: 2 undelivered: 0 <nil>
	// {Calls:1 Attempts:2 Retries:1 Rejections:0 Waits:0 Events:2 SinkErrors:0 Panics:0}
}

var errBusy = errors.New("overloaded")

// startServer runs an embedded JetStream server for the example.
func startServer() *embedded.Server {
	dir, err := osMkdirTemp()
	if err != nil {
		panic(err)
	}
	s, err := embedded.Start(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: dir, NoLog: true})
	if err != nil {
		panic(err)
	}
	return s
}

// DoResult is Do that also returns the call's request_id (here made by
// the middleware, as Call.RequestID is empty) and its number of attempts,
// to find the call in the ledger afterwards.
func ExampleDoResult() {
	srv := startServer()
	defer srv.Shutdown()
	ctx := context.Background()
	mw, closePub := busyMiddleware(ctx, srv) // Example's wiring
	defer closePub()

	var seen string // the request_id the attempts saw
	call := ledger.Call{SessionID: "sess-1", Provider: "anthropic", Model: "claude-sonnet-4-5"}
	res, err := ledger.DoResult(ctx, mw, call, func(ctx context.Context, a ledger.Attempt) (string, ledger.Report, error) {
		seen = a.RequestID
		if a.Number == 0 {
			return "", ledger.Report{}, errBusy
		}
		return "hello", ledger.Report{Usage: ledger.Usage{InputTokens: 500, OutputTokens: 12}}, nil
	})
	fmt.Println(res.Value, err)
	fmt.Println("attempts:", res.Attempts)
	fmt.Println("request_id made by the middleware:", res.RequestID != "" && res.RequestID == seen)
	// Output:
	// hello <nil>
	// attempts: 2
	// request_id made by the middleware: true
}

// busyMiddleware is Example's wiring on srv: a middleware that retries
// errBusy, publishing to srv, with opts besides; closePub drains the
// publisher and closes the connection.
func busyMiddleware(ctx context.Context, srv *embedded.Server, opts ...ledger.MiddlewareOption) (mw *ledger.Middleware, closePub func()) {
	conn, err := ledger.Connect(ctx, ledger.WithURL(srv.URL()))
	if err != nil {
		panic(err)
	}
	pub, err := ledger.NewPublisher(ctx, conn.JetStream(), ledger.WithCreateStream(ledger.StreamConfig{}))
	if err != nil {
		panic(err)
	}
	mw, err = ledger.NewMiddleware(pub, append([]ledger.MiddlewareOption{ledger.WithPolicy(ledger.Policy{
		MaxRetries: 2, BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond, HintCap: time.Second,
	}), ledger.WithClassifiers(ledger.ClassifierFunc(func(err error, now time.Time) (ledger.Classification, bool) {
		return ledger.Classification{Kind: ledger.KindOverloaded, Status: 529, Retryable: true}, errors.Is(err, errBusy)
	}))}, opts...)...)
	if err != nil {
		panic(err)
	}
	return mw, func() {
		if _, err := pub.Close(ctx); err != nil {
			panic(err)
		}
		conn.Close()
	}
}
