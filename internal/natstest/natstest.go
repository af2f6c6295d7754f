package natstest

import (
	"net/url"
	"strconv"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/embedded"
)

// Server is a running test server.
type Server struct {
	*embedded.Server
	StoreDir string
}

// Option changes the server's options before it starts.
type Option func(*server.Options)

// WithMaxPayload sets the largest message the server takes from a client
// (max_payload; the server's default is 1 MiB).
func WithMaxPayload(n int32) Option {
	return func(o *server.Options) { o.MaxPayload = n }
}

// Start runs a JetStream server for the test and shuts it down at cleanup.
func Start(t testing.TB, options ...Option) *Server {
	t.Helper()
	dir := t.TempDir()
	opts := &server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		JetStream: true,
		StoreDir:  dir,
		NoLog:     true,
		NoSigs:    true,
	}
	return start(t, opts, options)
}

// start applies options to opts and runs the server until cleanup.
func start(t testing.TB, opts *server.Options, options []Option) *Server {
	t.Helper()
	for _, o := range options {
		o(opts)
	}
	s, err := embedded.Start(opts)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	t.Cleanup(s.Shutdown)
	return &Server{Server: s, StoreDir: opts.StoreDir}
}

// Connect opens a connection to the server, closed at cleanup.
func (s *Server) Connect(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(s.URL(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatalf("natstest: connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("natstest: jetstream: %v", err)
	}
	return nc, js
}

// StartJS is Start followed by Connect.
func StartJS(t testing.TB, options ...Option) (*Server, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	s := Start(t, options...)
	nc, js := s.Connect(t)
	return s, nc, js
}

// Restart starts a server again on s's port and store directory, as NATS
// coming back after an outage (s must be shut down), and shuts it down at
// cleanup. Clients that reconnect find the same streams and buckets.
func (s *Server) Restart(t testing.TB) *Server {
	t.Helper()
	u, err := url.Parse(s.URL())
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	again, err := embedded.Start(&server.Options{
		Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: s.StoreDir, NoLog: true, NoSigs: true,
	})
	if err != nil {
		t.Fatalf("natstest: restart: %v", err)
	}
	t.Cleanup(again.Shutdown)
	return &Server{Server: again, StoreDir: s.StoreDir}
}
