package gateway_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger"
	"github.com/agentledger/ledger/gateway"
	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/topology"
	"github.com/agentledger/ledger/ledgertest"
	"github.com/agentledger/ledger/provider/openai"
)

// Every option checks its argument, and New what no option can check
// alone: the error wraps ledger.ErrInvalidOption and names the option and
// the rule.
func TestOptionsAreValidated(t *testing.T) {
	l := ledgertest.Start(t, ledgertest.WithoutAggregator())
	pub := gateway.WithPublisher(l.Publisher(t))
	keys := filepath.Join(t.TempDir(), "keys.json")
	require.NoError(t, os.WriteFile(keys, []byte(`{"keys": []}`), 0o600))
	for _, tc := range []struct {
		name string
		opts []gateway.Option
		want string
	}{
		{"no destination", nil, "gateway.New: no destination for the attempt events"},
		{"nil option", []gateway.Option{pub, nil}, "gateway.New: nil option"},
		{"nil publisher", []gateway.Option{gateway.WithPublisher(nil)}, "gateway.WithPublisher: publisher must not be nil"},
		{"nil conn", []gateway.Option{gateway.WithNATS(nil)}, "gateway.WithNATS: conn must not be nil"},
		{"empty URL", []gateway.Option{gateway.WithNATSURL("")}, "gateway.WithNATSURL: url must not be empty"},
		{"two connections", []gateway.Option{gateway.WithNATS(l.Connect(t)), gateway.WithNATSURL(l.URL())}, "gateway.WithNATSURL: not with WithNATS"},
		{"origin with a query", []gateway.Option{pub, gateway.WithUpstream(openai.Name, "http://127.0.0.1:1/openai?x=1")}, "gateway.WithUpstream: origin of openai"},
		{"origin not http", []gateway.Option{pub, gateway.WithUpstream(openai.Name, "ftp://127.0.0.1:1")}, "the scheme must be http or https"},
		{"unknown provider", []gateway.Option{pub, gateway.WithUpstream("nosuchprovider", "http://127.0.0.1:1")}, `gateway.WithUpstream: Upstreams: "nosuchprovider" is not one of the gateway's providers (anthropic, gemini, openai)`},
		{"empty provider", []gateway.Option{pub, gateway.WithUpstream("", "http://127.0.0.1:1")}, "gateway.WithUpstream: provider must not be empty"},
		{"bad policy", []gateway.Option{pub, gateway.WithRetryPolicy(ledger.Policy{MaxRetries: -1})}, "gateway.WithRetryPolicy: "},
		{"negative attempt timeout", []gateway.Option{pub, gateway.WithRetryPolicy(ledger.Policy{BaseDelay: time.Second, MaxDelay: time.Second, HintCap: time.Second, AttemptTimeout: -1})}, "gateway.WithRetryPolicy: AttemptTimeout is -1ns"},
		{"negative limit", []gateway.Option{pub, gateway.WithLimits(gateway.Limits{WriteTimeout: -time.Second})}, "gateway.WithLimits: Limits.WriteTimeout is negative"},
		{"keys and no auth", []gateway.Option{pub, gateway.WithKeysFile(keys), gateway.WithInsecureNoAuth()}, "gateway.WithInsecureNoAuth: not with WithKeysFile"},
		{"missing keys file", []gateway.Option{pub, gateway.WithKeysFile(filepath.Join(t.TempDir(), "none.json"))}, "gateway.WithKeysFile: "},
		{"bad session", []gateway.Option{pub, gateway.WithDefaultSession("a b")}, "gateway.WithDefaultSession: "},
		{"nil logger", []gateway.Option{pub, gateway.WithLogger(nil)}, "gateway.WithLogger: logger must not be nil"},
		{"nil tracer provider", []gateway.Option{pub, gateway.WithTracerProvider(nil)}, "gateway.WithTracerProvider: provider must not be nil"},
		{"nil meter provider", []gateway.Option{pub, gateway.WithMeterProvider(nil)}, "gateway.WithMeterProvider: provider must not be nil"},
		{"bad labels", []gateway.Option{pub, gateway.WithLabels(ledger.Labels{"team": strings.Repeat("v", 129)})}, `gateway.WithLabels: labels["team"]: value must be 1 to 128 bytes, got 129`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw, err := gateway.New(tc.opts...)
			require.Error(t, err)
			assert.Nil(t, gw)
			assert.ErrorIs(t, err, ledger.ErrInvalidOption)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// Without client keys, Serve serves loopback only, as the command does:
// a listener on every interface is refused unless WithInsecureNoAuth.
func TestServeBeyondLoopbackNeedsKeys(t *testing.T) {
	l := ledgertest.Start(t, ledgertest.WithoutAggregator())
	for _, tc := range []struct {
		name    string
		opts    []gateway.Option
		refused bool
	}{
		{"no keys", nil, true},
		{"insecure", []gateway.Option{gateway.WithInsecureNoAuth()}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw, err := gateway.New(append([]gateway.Option{gateway.WithPublisher(l.Publisher(t))}, tc.opts...)...)
			require.NoError(t, err)
			ln, err := net.Listen("tcp", ":0")
			require.NoError(t, err)
			ctx, stop := context.WithCancel(t.Context())
			served := make(chan error, 1)
			go func() { served <- gw.Serve(ctx, ln) }()
			if tc.refused {
				err := <-served
				require.ErrorIs(t, err, gateway.ErrNoKeys)
				assert.Contains(t, err.Error(), "WithKeysFile")
			} else {
				port := ln.Addr().(*net.TCPAddr).Port
				resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/no-such-path")
				require.NoError(t, err, "served")
				resp.Body.Close()
				stop()
				require.NoError(t, <-served)
			}
			stop()
			require.NoError(t, gw.Close(t.Context()))
		})
	}
}

// Close drains what the gateway owes: with NATS gone, the event of a call
// it answered cannot be delivered, and Close says how many were not.
func TestCloseSaysHowManyEventsAreUndelivered(t *testing.T) {
	srv, _, js := natstest.StartJS(t)
	_, err := topology.EnsureAttempts(t.Context(), js, topology.Config{})
	require.NoError(t, err)
	up := ledgertest.FakeOpenAI(t, ledgertest.Succeed(ledger.Usage{InputTokens: 3, OutputTokens: 1}))
	gw, err := gateway.New(gateway.WithNATSURL(srv.URL()), ledgertest.GatewayUpstream(up))
	require.NoError(t, err)
	srv.Shutdown()

	h := httptest.NewServer(gw) // the gateway is a handler: any server will do
	defer h.Close()
	req, err := http.NewRequest("POST", h.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4.1-mini","messages":[{"role":"user","content":"Hello"}]}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer test")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	h.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	err = gw.Close(ctx)
	var ue *ledger.UndeliveredError
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, uint64(1), ue.Count)
	assert.Contains(t, err.Error(), "1 event(s) undelivered")
	assert.True(t, errors.Is(gw.Close(t.Context()), ledger.ErrUndelivered), "Close is idempotent")
}

// Serve hardens the server as the command does: a client that sends
// half its headers is cut after Limits.HeaderTimeout.
func TestServeCutsSlowHeaders(t *testing.T) {
	l := ledgertest.Start(t, ledgertest.WithoutAggregator())
	gw, err := gateway.New(gateway.WithPublisher(l.Publisher(t)), gateway.WithLimits(gateway.Limits{HeaderTimeout: 50 * time.Millisecond}))
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, stop := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- gw.Serve(ctx, ln) }()

	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write([]byte("POST /v1/messages HTTP/1.1\r\nHost: gateway\r\n")) // and never the rest
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(30*time.Second))) // a bound, not a wait: the cut comes first
	_, err = io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the connection was not cut within 30 s: no header timeout")
	}

	stop()
	require.NoError(t, <-served)
	require.NoError(t, gw.Close(t.Context()))
}

// On a NATS without the ledger's stream New says so (and closes the
// connection it made), rather than serve calls whose events go nowhere.
func TestNewWithoutTheStream(t *testing.T) {
	srv := natstest.Start(t)
	gw, err := gateway.New(gateway.WithNATSURL(srv.URL()))
	require.ErrorIs(t, err, ledger.ErrNoStream)
	assert.Nil(t, gw)
	assert.Contains(t, err.Error(), "start the aggregator first")
}
