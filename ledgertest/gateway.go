package ledgertest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/agentledger/ledger/gateway"
)

// Gateway is a gateway (package gateway) serving on a loopback port for
// one test, publishing to its Ledger.
type Gateway struct {
	url string
}

// URL is the gateway's root, http://127.0.0.1:PORT: the base URL of an
// Anthropic or Gemini client; an OpenAI client's is URL()+"/v1".
func (g *Gateway) URL() string { return g.url }

// StartGateway serves a gateway on a random loopback port whose events go
// to l (on a publisher of l.Publisher, which WaitCaughtUp flushes, and
// the attempt numbers in l's bucket), configured by opts: point a
// provider at a fake upstream with GatewayUpstream, and give
// gateway.WithRetryPolicy for short waits between attempts (the default
// waits a second before the first retry). At the test's cleanup the
// gateway stops (calls in flight may finish) and its events are flushed;
// a gateway that could not start, or stopped with an error, fails the
// test.
func StartGateway(t testing.TB, l *Ledger, opts ...gateway.Option) *Gateway {
	t.Helper()
	all := append([]gateway.Option{gateway.WithNATS(l.Connect(t)), gateway.WithPublisher(l.Publisher(t))}, opts...)
	gw, err := gateway.New(all...)
	if err != nil {
		t.Fatalf("ledgertest: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("ledgertest: listening: %v", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- gw.Serve(ctx, ln) }()
	t.Cleanup(func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("ledgertest: the gateway stopped: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := gw.Close(ctx); err != nil {
			t.Errorf("ledgertest: %v", err)
		}
	})
	return &Gateway{url: "http://" + ln.Addr().String()}
}

// GatewayUpstream sends the gateway's calls of up's provider to up: point
// the provider's SDK at the gateway, and the scripted steps answer it.
func GatewayUpstream(up *Upstream) gateway.Option {
	// The fake serves each provider under /NAME (its SDK's base URL is
	// that and the API's version, URL()); the gateway appends the
	// request's path to the origin's.
	return gateway.WithUpstream(up.provider, up.srv.URL()+"/"+up.provider)
}

// GatewayCompatible mounts up, a fake OpenAI (FakeOpenAI), as the
// OpenAI-compatible upstream name under OpenAI's rules: clients call
// GATEWAY/name/v1 and the ledger records provider name
// (gateway.WithOpenAICompatible).
func GatewayCompatible(name string, up *Upstream) gateway.Option {
	return gateway.WithOpenAICompatible(name, "", up.srv.URL()+"/"+up.provider)
}
