package connect

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DefaultTimeout is how long each server gets to accept a connection.
const DefaultTimeout = 5 * time.Second

// ErrNoServer is returned when no server is named anywhere and embedding
// is not allowed.
var ErrNoServer = errors.New("connect: no NATS server")

// Options say where NATS is and how to prove who we are. The string
// settings are those of the nats CLI; FromEnv fills the empty ones from
// its environment variables.
type Options struct {
	// URL is the server URL or a comma-separated list (--nats-url). A
	// user and password (nats://user:pass@host) or a token
	// (nats://token@host) in it are offered as credentials.
	URL string
	// Creds is a JWT creds file (--creds).
	Creds string
	// NKey is an NKEY seed file (--nkey).
	NKey string
	// CA is a PEM file of the CA that signed the server's certificate
	// (--tls-ca); Cert and Key are the client certificate and its key for
	// mutual TLS (--tls-cert, --tls-key).
	CA, Cert, Key string
	// Context is a nats CLI context name, or a path to its .json file
	// (--context). Settings above that are set win over its own.
	Context string
	// InboxPrefix replaces _INBOX as the prefix of the connection's reply
	// subjects (--inbox-prefix; a context's inbox_prefix otherwise), so
	// that a role can be granted its own replies only (docs/security.md).
	// It must be a subject without wildcards.
	InboxPrefix string

	// Getenv reads the environment for contexts ($XDG_CONFIG_HOME, $VAR
	// in paths); nil means os.Getenv. (Options are filled from the
	// environment only by FromEnv.)
	Getenv func(string) string
	// Timeout bounds the connection to each server; 0 means
	// DefaultTimeout.
	Timeout time.Duration
	// Logger receives the reconnect records; nil discards them.
	Logger *slog.Logger

	// Embed, when set, starts an embedded server when no URL is given
	// anywhere (the aggregator's, from nats.conf). It is a function so
	// that programs that never embed (agents) do not link the server.
	Embed func() (Embedded, error)
	// Name is the client connection name.
	Name string
}

// Embedded is an in-process server that Open started (see Options.Embed).
type Embedded interface {
	URL() string
	Shutdown()
}

// Conn is an open connection, with the embedded server it started, if any.
type Conn struct {
	NC       *nats.Conn
	JS       jetstream.JetStream
	Embedded Embedded // nil when connected to an outside server
	closed   chan struct{}
	once     sync.Once

	denyOnce sync.Once
	denied   chan struct{} // closed at the first permission violation
	denial   *PermissionError
}

// Open connects as the options say. A connection that fails is an
// *Error; settings that cannot work are refused before any connection
// with an error wrapping ErrInvalidOptions.
func Open(o Options) (*Conn, error) {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	var ctx *natsContext
	if o.Context != "" {
		var err error
		if ctx, err = loadContext(o.Context, getenv); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
		}
	}
	s := merge(o, ctx)
	if err := s.check(); err != nil {
		return nil, err
	}
	c := &Conn{closed: make(chan struct{}), denied: make(chan struct{})}
	if s.urls == "" {
		if o.Embed == nil {
			return nil, fmt.Errorf("%w: give --nats-url, set %s or name a --context", ErrNoServer, EnvURL)
		}
		srv, err := o.Embed()
		if err != nil {
			return nil, err
		}
		c.Embedded = srv
		s.urls = srv.URL()
	}
	if err := c.dial(o, s); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Conn) dial(o Options, s settings) error {
	auth, err := s.natsOptions()
	if err != nil {
		return err
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	opts := append([]nats.Option{nats.Name(o.Name), nats.Timeout(timeout)}, auth...)
	opts = append(opts, reconnectOptions(log, func() { c.once.Do(func() { close(c.closed) }) }, c.deny)...)
	nc, err := nats.Connect(s.urls, opts...)
	if err != nil {
		return &Error{Server: redact(s.urls), Offered: s.offered(), Refused: refusal(err, s), Err: err}
	}
	c.NC = nc
	jsOpts := []jetstream.JetStreamOpt{jetstream.WithPublishAsyncMaxPending(8192)}
	switch {
	case s.jsDomain != "":
		c.JS, err = jetstream.NewWithDomain(nc, s.jsDomain, jsOpts...)
	case s.jsAPIPrefix != "":
		c.JS, err = jetstream.NewWithAPIPrefix(nc, s.jsAPIPrefix, jsOpts...)
	default:
		c.JS, err = jetstream.New(nc, jsOpts...)
	}
	if err != nil {
		return fmt.Errorf("connect: jetstream: %w", err)
	}
	return nil
}

// URL is the server's URL, without secrets.
func (c *Conn) URL() string {
	if c.NC != nil {
		return redact(c.NC.ConnectedUrl())
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
