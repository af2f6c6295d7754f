package connect

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/embedded"
)

// EnvURL is the environment variable that names the NATS server.
const EnvURL = "NATS_URL"

// ErrNoServer is returned when no URL is given and embedding is not allowed.
var ErrNoServer = errors.New("connect: no NATS server")

// Options say where NATS is.
type Options struct {
	// URL is the --nats-url flag; when empty, NATS_URL is used.
	URL string
	// EmbedConfig is the nats-server configuration to start an embedded
	// server from when neither URL nor NATS_URL is set; empty disables it.
	EmbedConfig string
	// StoreDir overrides the embedded server's store directory.
	StoreDir string
	// Name is the client connection name.
	Name string
	// ServerLogs makes the embedded server log to stderr.
	ServerLogs bool
}

// Conn is an open connection, with the embedded server it started, if any.
type Conn struct {
	NC       *nats.Conn
	JS       jetstream.JetStream
	Embedded *embedded.Server // nil when connected to an outside server
	closed   chan struct{}
}

// Open connects as the options say.
func Open(o Options) (*Conn, error) {
	url := o.URL
	if url == "" {
		url = os.Getenv(EnvURL)
	}
	c := &Conn{closed: make(chan struct{})}
	if url == "" {
		if o.EmbedConfig == "" {
			return nil, fmt.Errorf("%w: give --nats-url or set %s", ErrNoServer, EnvURL)
		}
		srv, err := embedded.FromConfig(o.EmbedConfig, o.StoreDir, o.ServerLogs)
		if err != nil {
			return nil, err
		}
		c.Embedded = srv
		url = srv.URL()
	}
	nc, err := nats.Connect(url,
		nats.Name(o.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond),
		nats.Timeout(5*time.Second),
		nats.ClosedHandler(func(*nats.Conn) { close(c.closed) }),
	)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("connect: %s: %w", url, err)
	}
	c.NC = nc
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(8192))
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("connect: jetstream: %w", err)
	}
	c.JS = js
	return c, nil
}

// URL is the server's URL.
func (c *Conn) URL() string {
	if c.NC != nil {
		return c.NC.ConnectedUrl()
	}
	return ""
}

// Close drains the connection and stops the embedded server, if any.
func (c *Conn) Close() {
	if c.NC != nil {
		// Drain lets in-flight publishes and acks finish; it closes the
		// connection when done, or we close it after a bound.
		if err := c.NC.Drain(); err == nil {
			select {
			case <-c.closed:
			case <-time.After(5 * time.Second):
			}
		}
		c.NC.Close()
	}
	if c.Embedded != nil {
		c.Embedded.Shutdown()
	}
}
