package ledger_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger"
)

// Labels attribute calls: defaults on the middleware (WithLabels) and
// more on each Call, a key set on the Call winning. Every attempt's event
// carries the merged labels; a call with a label that breaks a rule fails
// before any attempt, with an error naming the key and the rule.
func ExampleWithLabels() {
	srv := startServer()
	defer srv.Shutdown()
	ctx := context.Background()
	mw, closePub := busyMiddleware(ctx, srv, ledger.WithLabels(ledger.Labels{"team": "search", "env": "prod"})) // Example's wiring

	call := ledger.Call{SessionID: "sess-1", Provider: "anthropic", Model: "claude-sonnet-4-5",
		Labels: ledger.Labels{"team": "ads", "user": "u-42"}}
	_, err := ledger.Do(ctx, mw, call, func(ctx context.Context, a ledger.Attempt) (string, ledger.Report, error) {
		if a.Number == 0 {
			return "", ledger.Report{}, errBusy
		}
		return "hello", ledger.Report{Usage: ledger.Usage{InputTokens: 500, OutputTokens: 12}}, nil
	})
	fmt.Println(err)

	call.Labels = ledger.Labels{"Team": "ads"}
	_, err = ledger.Do(ctx, mw, call, func(ctx context.Context, a ledger.Attempt) (string, ledger.Report, error) {
		panic("not called: the labels are checked first")
	})
	var le *ledger.LabelError
	fmt.Println(errors.Is(err, ledger.ErrInvalidCall), errors.As(err, &le), le.Key)
	fmt.Println(err)

	closePub()
	for _, ev := range attemptEvents(ctx, srv.URL(), 2) {
		fmt.Println(ev.Attempt, ev.Labels)
	}
	// Output:
	// <nil>
	// true true Team
	// ledger: invalid call: labels["Team"]: key must be a lower-case letter followed by lower-case letters, digits and '_'
	// 0 map[env:prod team:ads user:u-42]
	// 1 map[env:prod team:ads user:u-42]
}

// labeledEvent is what the example reads of an attempt event.
type labeledEvent struct {
	Attempt int               `json:"attempt"`
	Labels  map[string]string `json:"labels"`
}

// attemptEvents reads the first n events of LEDGER_ATTEMPTS on the
// server at url, waiting for them.
func attemptEvents(ctx context.Context, url string, n int) []labeledEvent {
	conn, err := ledger.Connect(ctx, ledger.WithURL(url))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	c, err := conn.JetStream().OrderedConsumer(ctx, "LEDGER_ATTEMPTS", jetstream.OrderedConsumerConfig{})
	if err != nil {
		panic(err)
	}
	batch, err := c.Fetch(n)
	if err != nil {
		panic(err)
	}
	var out []labeledEvent
	for msg := range batch.Messages() {
		var ev labeledEvent
		if err := json.Unmarshal(msg.Data(), &ev); err != nil {
			panic(err)
		}
		out = append(out, ev)
	}
	return out
}
