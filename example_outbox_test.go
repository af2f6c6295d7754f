package ledger_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/agentledger/ledger"
	"github.com/agentledger/ledger/internal/embedded"
)

// A publisher with an outbox keeps the events of an outage on disk: the
// next publisher on the same directory delivers them.
func ExampleWithOutbox() {
	store, _ := osMkdirTemp()
	defer os.RemoveAll(store)
	outbox := filepath.Join(store, "outbox")
	ctx := context.Background()

	srv := startStore(store)
	conn, _ := ledger.Connect(ctx, ledger.WithURL(srv.URL()))
	pub, _ := ledger.NewPublisher(ctx, conn.JetStream(), ledger.WithCreateStream(ledger.StreamConfig{}), ledger.WithOutbox(outbox))
	mw, _ := ledger.NewMiddleware(pub)

	srv.Shutdown() // NATS goes away
	call := ledger.Call{SessionID: "sess-1", Provider: "anthropic", Model: "claude-sonnet-4-5"}
	_, err := ledger.Do(ctx, mw, call, func(context.Context, ledger.Attempt) (string, ledger.Report, error) {
		return "hello", ledger.Report{Usage: ledger.Usage{InputTokens: 500, OutputTokens: 12}}, nil
	})
	fmt.Println("call:", err)
	fmt.Println("in the outbox:", pub.Stats().OutboxEvents)
	drain, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	st, err := pub.Close(drain) // the process stops during the outage
	cancel()
	conn.Close()
	fmt.Println("undelivered:", st.Undelivered, "kept:", st.Kept, err != nil)

	srv = startStore(store) // NATS is back
	defer srv.Shutdown()
	conn, _ = ledger.Connect(ctx, ledger.WithURL(srv.URL()))
	defer conn.Close()
	pub, _ = ledger.NewPublisher(ctx, conn.JetStream(), ledger.WithOutbox(outbox))
	st, err = pub.Close(ctx)
	fmt.Println("recovered:", st.Recovered, "acked:", st.Acked, "left:", st.OutboxEvents, err)
	// Output:
	// call: <nil>
	// in the outbox: 1
	// undelivered: 1 kept: 1 true
	// recovered: 1 acked: 1 left: 0 <nil>
}

// startStore runs an embedded JetStream server on the store directory.
func startStore(dir string) *embedded.Server {
	s, err := embedded.Start(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: dir, NoLog: true})
	if err != nil {
		panic(err)
	}
	return s
}
