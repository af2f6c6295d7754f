package ledgertest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger"
	"github.com/agentledger/ledger/internal/embedded"
	internaltest "github.com/agentledger/ledger/internal/ledgertest"
	"github.com/agentledger/ledger/internal/projection"
	"github.com/agentledger/ledger/internal/topology"
)

// Ledger is an embedded JetStream server with the ledger's stream, and an
// aggregator projecting it, for one test.
type Ledger struct {
	srv *embedded.Server
	js  jetstream.JetStream

	mu   sync.Mutex
	pubs []*ledger.Publisher // made by Publisher, flushed by WaitCaughtUp
}

// Option configures Start.
type Option func(*options)

type options struct{ aggregator bool }

// WithoutAggregator starts the server and the stream without an
// aggregator, for tests that run their own (aggregator run --nats-url
// l.URL()).
func WithoutAggregator() Option { return func(o *options) { o.aggregator = false } }

// Start runs a JetStream server on a random loopback port with its store
// in the test's temp dir, creates the stream of attempt events and starts
// an aggregator in process. Everything stops at the test's cleanup; an
// aggregator that stopped with an error fails the test.
func Start(t testing.TB, opts ...Option) *Ledger {
	t.Helper()
	o := options{aggregator: true}
	for _, opt := range opts {
		opt(&o)
	}
	srv, err := embedded.Start(&server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
	})
	if err != nil {
		t.Fatalf("ledgertest: starting the server: %v", err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.URL(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatalf("ledgertest: connecting: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("ledgertest: jetstream: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := topology.EnsureAttempts(ctx, js, topology.Config{}); err != nil {
		t.Fatalf("ledgertest: creating the stream: %v", err)
	}
	l := &Ledger{srv: srv, js: js}
	if o.aggregator {
		internaltest.RunAggregator(t, l.js, projection.Config{LeaseTTL: time.Second})
	}
	return l
}

// URL is the server's client URL, for ledger.WithURL or the commands'
// --nats-url.
func (l *Ledger) URL() string { return l.srv.URL() }

// Connect connects to the server with ledger.Connect (and opts), and
// closes the connection at the test's cleanup.
func (l *Ledger) Connect(t testing.TB, opts ...ledger.ConnectOption) *ledger.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := ledger.Connect(ctx, append([]ledger.ConnectOption{ledger.WithURL(l.URL())}, opts...)...)
	if err != nil {
		t.Fatalf("ledgertest: %v", err)
	}
	t.Cleanup(conn.Close)
	return conn
}

// Publisher connects and returns a publisher on the connection. At the
// test's cleanup it closes the publisher (failing the test if any event
// was undelivered within 30 s) and then the connection.
func (l *Ledger) Publisher(t testing.TB, opts ...ledger.PublisherOption) *ledger.Publisher {
	t.Helper()
	conn := l.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pub, err := ledger.NewPublisher(ctx, conn.JetStream(), opts...)
	if err != nil {
		t.Fatalf("ledgertest: %v", err)
	}
	l.mu.Lock()
	l.pubs = append(l.pubs, pub)
	l.mu.Unlock()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pub.Close(ctx); err != nil {
			t.Errorf("ledgertest: closing the publisher: %v", err)
		}
	})
	return pub
}

// WaitCaughtUp flushes the publishers made by Publisher and waits (up to
// 30 s; the test fails after that) until the ledger has applied every
// event in the stream. Flush other publishers first, so that their events
// are in the stream.
func (l *Ledger) WaitCaughtUp(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l.flush(ctx, t)
	if applied, last, err := projection.WaitCaughtUp(ctx, l.js, 5*time.Millisecond); err != nil {
		t.Fatalf("ledgertest: the ledger applied %d of %d events within 30s: %v", applied, last, err)
	}
}

// flush flushes the publishers made by Publisher, so that their events are
// in the stream.
func (l *Ledger) flush(ctx context.Context, t testing.TB) {
	t.Helper()
	l.mu.Lock()
	pubs := append([]*ledger.Publisher(nil), l.pubs...)
	l.mu.Unlock()
	for _, p := range pubs {
		if err := p.Flush(ctx); err != nil && !errors.Is(err, ledger.ErrPublisherClosed) {
			t.Fatalf("ledgertest: flushing a publisher: %v", err)
		}
	}
}
