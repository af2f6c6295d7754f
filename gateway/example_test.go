package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/agentledger/ledger"
	"github.com/agentledger/ledger/gateway"
	"github.com/agentledger/ledger/provider/openai"
)

// A gateway embedded in a program: events to a publisher on NATS (here an
// embedded server), OpenAI's calls to an upstream that fails the first
// attempt with a 500. The client sees one answer; the upstream saw two
// attempts, and the publisher two events.
func Example() {
	ctx := context.Background()
	ns, stopNATS := startNATS() // in production: your NATS, and the aggregator
	defer stopNATS()
	conn, err := ledger.Connect(ctx, ledger.WithURL(ns.ClientURL()))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	pub, err := ledger.NewPublisher(ctx, conn.JetStream(), ledger.WithCreateStream(ledger.StreamConfig{}))
	if err != nil {
		panic(err)
	}

	var attempts atomic.Int32
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if attempts.Add(1) == 1 {
			http.Error(w, `{"error":{"message":"boom","type":"server_error"}}`, http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4.1-mini",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}`)
	}))
	defer upstream.Close()

	gw, err := gateway.New(
		gateway.WithPublisher(pub),
		gateway.WithUpstream(openai.Name, upstream.URL),
		gateway.WithRetryPolicy(ledger.Policy{MaxRetries: 2, BaseDelay: 10 * time.Millisecond, MaxDelay: 100 * time.Millisecond, HintCap: time.Second}),
	)
	if err != nil {
		panic(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0") // port 0: a free one
	if err != nil {
		panic(err)
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- gw.Serve(sctx, ln) }()

	// An SDK would use "http://"+ln.Addr()+"/v1" as its base URL.
	req, _ := http.NewRequest("POST", "http://"+ln.Addr().String()+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4.1-mini","messages":[{"role":"user","content":"Hello"}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Ledger-Session-Id", "sess-example")
	req.Header.Set("X-Ledger-Request-Id", "req-example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println("status:", resp.StatusCode, "request:", resp.Header.Get("X-Ledger-Request-Id"))

	stop()
	if err := <-served; err != nil {
		panic(err)
	}
	if err := gw.Close(ctx); err != nil { // flushes pub: every event acknowledged
		panic(err)
	}
	fmt.Println("upstream attempts:", attempts.Load())
	fmt.Println("events acknowledged:", pub.Stats().Acked)
	if _, err := pub.Close(ctx); err != nil {
		panic(err)
	}
	// Output:
	// status: 200 request: req-example
	// upstream attempts: 2
	// events acknowledged: 2
}

// startNATS starts an embedded JetStream server on a free loopback port;
// stop shuts it down and removes its store.
func startNATS() (_ *server.Server, stop func()) {
	dir, err := os.MkdirTemp("", "gateway-example-")
	if err != nil {
		panic(err)
	}
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		panic(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		panic("nats: not ready")
	}
	return ns, func() {
		ns.Shutdown()
		os.RemoveAll(dir)
	}
}
