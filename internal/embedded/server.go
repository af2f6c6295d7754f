package embedded

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ErrNotReady is returned when the server does not accept connections in
// time.
var ErrNotReady = errors.New("embedded: NATS server not ready")

// ErrAddrInUse is returned when the configured listen address is taken.
var ErrAddrInUse = errors.New("embedded: listen address in use")

// Server is a running embedded NATS server.
type Server struct {
	srv *server.Server
}

// FromConfig starts a server from a nats-server configuration file
// (normally nats.conf), forcing JetStream on. storeDir, when not empty,
// overrides the file's store_dir. The server logs to stderr only when logs
// is true. Unless the file sets sync_interval, the server syncs every
// write to disk before acknowledging it (DurableDefaults).
func FromConfig(path, storeDir string, logs bool) (*Server, error) {
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		return nil, fmt.Errorf("embedded: reading %s: %w", path, err)
	}
	opts.JetStream = true
	DurableDefaults(opts)
	if storeDir != "" {
		opts.StoreDir = storeDir
	}
	opts.NoLog = !logs
	return Start(opts)
}

// DurableDefaults makes opts sync every JetStream write to disk before it
// is acknowledged (sync_interval: always) unless they set a sync interval
// already. nats-server's own default syncs every 2 minutes: on one node,
// an OS crash or a power cut then loses up to 2 minutes of acknowledged
// writes, and the ledger's checkpoint may survive the records written
// before it, which loses usage without a word. docs/contract.md
// (Durability) states what each setting guarantees.
func DurableDefaults(opts *server.Options) {
	if opts.SyncInterval == 0 && !opts.SyncAlways {
		opts.SyncAlways = true
	}
}

// Start runs a server with the given options and waits until it accepts
// connections.
func Start(opts *server.Options) (*Server, error) {
	opts.NoSigs = true
	if opts.Port > 0 {
		addr := net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("%w: %s is already in use (another aggregator or NATS server?); connect to it with --nats-url nats://%s, or stop it", ErrAddrInUse, addr, addr)
		}
		_ = ln.Close()
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	srv.ConfigureLogger()
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, fmt.Errorf("%w after 10s (listen %s:%d)", ErrNotReady, opts.Host, opts.Port)
	}
	return &Server{srv: srv}, nil
}

// URL is the client URL of the server.
func (s *Server) URL() string { return s.srv.ClientURL() }

// Server exposes the underlying server, for tests.
func (s *Server) Server() *server.Server { return s.srv }

// Shutdown stops the server and waits for it to finish.
func (s *Server) Shutdown() {
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
}
