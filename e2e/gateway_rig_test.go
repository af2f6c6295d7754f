package e2e

import (
	"context"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger"
	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/emit"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/gateway"
	internaltest "github.com/agentledger/ledger/internal/ledgertest"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/pricebook"
	"github.com/agentledger/ledger/internal/pricing"
	"github.com/agentledger/ledger/internal/projection"
	"github.com/agentledger/ledger/internal/provider"
	_ "github.com/agentledger/ledger/internal/provider/builtin"
	"github.com/agentledger/ledger/internal/retry"
	"github.com/agentledger/ledger/internal/sim/fakeprovider"
	"github.com/agentledger/ledger/internal/topology"
	"github.com/agentledger/ledger/ledgertest"
)

// faultMix has every fault the gateway must survive: 429 with
// retry-after, 529/503, 500, billed timeouts, broken streams, permanent
// 400s.
var faultMix = fakeprovider.Mix{RateLimit: 0.12, Overload: 0.08, ServerError: 0.08, BilledTimeout: 0.06, BrokenStream: 0.1, BadRequest: 0.04}

// gatewayRig is the whole path of an agent that reaches the ledger through
// the gateway: a fake provider (every provider's origin), the gateway in
// front of it publishing onto an embedded JetStream server, and an
// aggregator projecting the ledger.
type gatewayRig struct {
	ledger *ledgertest.Ledger
	js     jetstream.JetStream
	fp     *fakeprovider.Server
	pub    *emit.Publisher
	url    string             // the gateway's
	kv     jetstream.KeyValue // the gateway's attempt numbers
	events *retry.MemorySink  // a copy of every event the gateway published
}

// teeSink publishes every event to next and keeps a copy in mem.
type teeSink struct {
	mem  *retry.MemorySink
	next retry.Sink
}

func (s teeSink) Publish(ctx context.Context, ev *events.Attempt) error {
	_ = s.mem.Publish(ctx, ev)
	return s.next.Publish(ctx, ev)
}

// rigTimeout bounds an attempt's wait for its answer and a stream's
// silence: generous, since on a starved machine a short one can expire
// after the provider billed, which no event would show. Stalls on purpose
// cost this much each.
const rigTimeout = 2 * time.Second

func startGatewayRig(t *testing.T, seed uint64, mix fakeprovider.Mix, policy retry.Policy) *gatewayRig {
	t.Helper()
	return startRig(t, fakeprovider.Options{Seed: seed, Mix: mix}, policy)
}

// startRig starts the rig with the fake provider's options; the gateway
// also speaks for added, each at its dialect's prefix on the fake
// provider (which must speak it: fpOpts.Dialects).
func startRig(t *testing.T, fpOpts fakeprovider.Options, policy retry.Policy, added ...provider.Provider) *gatewayRig {
	t.Helper()
	return newRig(t, fpOpts, policy, nil, added...)
}

// newRig is startRig; with prices (a catalog file), the ledger prices
// with that file alone (over an empty default catalog, so that the test's
// rates are the only ones): it is loaded into ledger_prices (as
// `aggregator prices load` does) before the aggregator starts, and the
// gateway prices its answers with it too.
func newRig(t *testing.T, fpOpts fakeprovider.Options, policy retry.Policy, prices []byte, added ...provider.Provider) *gatewayRig {
	t.Helper()
	r := &gatewayRig{events: retry.NewMemorySink()}
	var catalog *pricing.Catalog
	if prices == nil {
		r.ledger = ledgertest.Start(t)
		r.js = r.ledger.Connect(t).JetStream()
	} else {
		r.ledger = ledgertest.Start(t, ledgertest.WithoutAggregator())
		r.js = r.ledger.Connect(t).JetStream()
		none, err := pricing.Parse([]byte(`{"entries": []}`))
		require.NoError(t, err)
		book, err := pricebook.Open(context.Background(), r.js, topology.Config{}, none)
		require.NoError(t, err)
		catalog, err = book.Load(context.Background(), prices, "e2e.json", time.Now())
		require.NoError(t, err)
		internaltest.RunAggregator(t, r.js, projection.Config{LeaseTTL: time.Second, Catalog: none})
	}
	require.Eventually(t, func() bool {
		_, err := r.js.KeyValue(context.Background(), names.RequestsBucket)
		return err == nil
	}, 30*time.Second, 5*time.Millisecond, "the aggregator creates the ledger's buckets, which the gateway looks requests up in")
	var err error
	r.fp, err = fakeprovider.Listen("127.0.0.1:0", fpOpts)
	require.NoError(t, err)
	t.Cleanup(r.fp.Close)
	r.pub, err = emit.New(r.js)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		st, err := r.pub.Close(ctx)
		assert.NoError(t, err)
		assert.Zero(t, st.Undelivered)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := topology.EnsureGatewayAttempts(ctx, r.js, topology.Config{}, time.Hour)
	require.NoError(t, err)
	r.kv = kv
	// A breaker that never opens: every attempt must reach the provider,
	// whose truth the ledger is compared with.
	group, err := breaker.NewGroup(breaker.Config{FailureThreshold: 1 << 20})
	require.NoError(t, err)
	origins := map[string]string{}
	for _, p := range provider.Names() {
		origins[p] = r.fp.URL()
	}
	providers := provider.Builtin()
	for _, p := range added {
		require.NoError(t, providers.Add(p))
		base := r.fp.BaseURL(p.Name()) // its SDK's: the fake's URL, its prefix and /v1/
		require.NotEmpty(t, base, "the fake provider speaks %s", p.Name())
		origins[p.Name()] = strings.TrimSuffix(base, "/v1/")
	}
	gw, err := gateway.New(gateway.Config{
		Providers:            providers,
		Upstreams:            origins,
		Retry:                retry.Options{Policy: policy, Sink: teeSink{r.events, r.pub}, Breakers: group},
		Attempts:             gateway.NewKVAttempts(kv, gateway.NewKVLedger(r.js)),
		ForwardLedgerHeaders: true,
		AttemptTimeout:       rigTimeout,
		StreamIdleTimeout:    rigTimeout,
		Prices:               catalog,
	})
	require.NoError(t, err)
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

// rigPolicy retries twice with short waits.
func rigPolicy() retry.Policy {
	return retry.Policy{MaxRetries: 2, BaseDelay: 5 * time.Millisecond, MaxDelay: 50 * time.Millisecond, Jitter: 0.2, HintCap: 5 * time.Second}
}

// requireLedgerEqualsTruth waits until every event is projected and
// compares the ledger with the fake provider's truth, request by request
// and session by session, to the token: usage exactly, billed exactly
// minus what no client could have seen (Unobservable).
func (r *gatewayRig) requireLedgerEqualsTruth(t *testing.T) *fakeprovider.Truth {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, r.pub.Flush(ctx))
	r.ledger.WaitCaughtUp(t)
	truth := r.fp.Truth()
	require.NotEmpty(t, truth.Requests)
	require.Zero(t, truth.Unidentified, "every upstream request carried the ledger headers")
	for id, want := range truth.Requests {
		got := r.ledger.Request(t, id)
		assert.Equal(t, want.SessionID, got.SessionID, "request %s", id)
		assert.Equal(t, len(want.Attempts), got.Attempts, "request %s attempts", id)
		assert.Equal(t, want.Succeeded, got.Status == ledgertest.StatusSucceeded, "request %s status %s", id, got.Status)
		assert.Equal(t, ledger.Usage(want.Usage), got.Usage, "request %s usage", id)
		assert.Equal(t, ledger.Usage(want.Billed.Sub(want.Unobservable)), got.Billed, "request %s billed (truth %+v, unobservable %+v)", id, want.Billed, want.Unobservable)
	}
	for id, want := range truth.Sessions {
		got := r.ledger.Session(t, id)
		assert.Equal(t, want.Requests, got.Requests, "session %s requests", id)
		assert.Equal(t, want.RequestsSucceeded, got.Succeeded, "session %s succeeded", id)
		assert.Equal(t, want.Attempts, got.Attempts, "session %s attempts", id)
		assert.Zero(t, got.Pending, "session %s: every request has its final event", id)
		assert.Equal(t, ledger.Usage(want.Usage), got.Usage, "session %s usage", id)
		assert.Equal(t, ledger.Usage(want.Billed.Sub(want.Unobservable)), got.Billed, "session %s billed", id)
	}
	return truth
}

// findRequestID returns a request ID whose attempts 0..failing-1 get a
// retryable fault (rate limit, overload or server error) and whose next
// attempt succeeds.
func findRequestID(t *testing.T, p fakeprovider.Plan, prefix string, failing int) string {
	t.Helper()
	retryable := map[fakeprovider.Fault]bool{fakeprovider.FaultRateLimit: true, fakeprovider.FaultOverload: true, fakeprovider.FaultServerError: true}
	for i := range 1_000_000 {
		id := prefix + "-" + strconv.Itoa(i)
		ok := p.Decide(id, failing).Fault == fakeprovider.FaultNone
		for n := 0; ok && n < failing; n++ {
			ok = retryable[p.Decide(id, n).Fault]
		}
		if ok {
			return id
		}
	}
	t.Fatalf("no request ID with %d retryable failures then a success", failing)
	return ""
}
