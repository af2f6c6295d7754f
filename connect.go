package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/connect"
)

// ErrRefused is wrapped by every *ConnectError.
var ErrRefused = api.ErrRefused

// ConnectError is a connection that failed: which Server (the URL or
// URLs, without their credentials), what was Offered (the kind of
// credential and the file, NKEY or JWT subject it came from, the CA and
// client certificate), what was Refused (what the server refused, or why
// it could not be reached) and the NATS client's Err. It never contains a
// password, token or seed. It unwraps to ErrRefused and Err.
type ConnectError = api.ConnectError

// Conn is a connection to NATS with JetStream, made by Connect.
type Conn struct {
	c *connect.Conn
}

// NATS returns the NATS connection.
func (c *Conn) NATS() *nats.Conn { return c.c.NC }

// JetStream returns the JetStream context of the connection (with the
// domain or API prefix of the context it was made from, if any).
func (c *Conn) JetStream() jetstream.JetStream { return c.c.JS }

// Close drains the connection (within 5 s) and closes it. Close the
// publisher first.
func (c *Conn) Close() { c.c.Close() }

// ConnectOption configures Connect.
type ConnectOption func(*connectOptions) error

// connectOptions are the connection package's options.
type connectOptions struct{ connect.Options }

// WithURL sets the server URL, or a comma-separated list of them. A user
// and password (nats://user:pass@host:4222) or a token
// (nats://token@host:4222) in it are offered as credentials.
func WithURL(url string) ConnectOption {
	return stringOption("WithURL", url, func(o *connectOptions) { o.URL = url })
}

// WithCredsFile offers the JWT creds file at path (the nats CLI's
// --creds), for servers in operator mode.
func WithCredsFile(path string) ConnectOption {
	return stringOption("WithCredsFile", path, func(o *connectOptions) { o.Creds = path })
}

// WithNKeyFile offers the NKEY whose seed is in the file at path (the
// nats CLI's --nkey).
func WithNKeyFile(path string) ConnectOption {
	return stringOption("WithNKeyFile", path, func(o *connectOptions) { o.NKey = path })
}

// WithRootCA trusts the server certificates signed by the CA in the PEM
// file at path (the nats CLI's --tls-ca), for a server with a private CA.
func WithRootCA(path string) ConnectOption {
	return stringOption("WithRootCA", path, func(o *connectOptions) { o.CA = path })
}

// WithClientCert offers the client certificate and key in the PEM files
// at certPath and keyPath, for mutual TLS (the nats CLI's --tls-cert and
// --tls-key).
func WithClientCert(certPath, keyPath string) ConnectOption {
	return func(o *connectOptions) error {
		if certPath == "" || keyPath == "" {
			return invalid("WithClientCert", "both the certificate and the key file are required")
		}
		o.Cert, o.Key = certPath, keyPath
		return nil
	}
}

// WithNATSContext connects as the nats CLI's saved context name (a file
// ~/.config/nats/context/NAME.json, or a path to such a file) says: its
// URL, credentials, TLS files, JetStream domain. Other options win over
// the context's settings, and any credential they give replaces all of
// the context's. The CLI's selected context is never used implicitly.
func WithNATSContext(name string) ConnectOption {
	return stringOption("WithNATSContext", name, func(o *connectOptions) { o.Context = name })
}

// WithInboxPrefix replaces _INBOX as the prefix of the connection's reply
// subjects, so that the NATS user can be granted its own replies only: an
// agent of the publisher role of docs/security.md uses _INBOX_publisher.
// The prefix must be a subject without wildcards; Connect refuses another.
func WithInboxPrefix(prefix string) ConnectOption {
	return stringOption("WithInboxPrefix", prefix, func(o *connectOptions) { o.InboxPrefix = prefix })
}

// WithEnv takes every setting not given by another option from the nats
// CLI's environment variables: NATS_URL, NATS_CREDS, NATS_NKEY, NATS_CA,
// NATS_CERT, NATS_KEY and NATS_CONTEXT.
func WithEnv() ConnectOption {
	return func(o *connectOptions) error {
		o.Getenv = os.Getenv
		return nil
	}
}

// WithName sets the connection's name, as the server's monitoring shows
// it (default "ledger-agent").
func WithName(name string) ConnectOption {
	return stringOption("WithName", name, func(o *connectOptions) { o.Name = name })
}

// WithConnectTimeout bounds the connection to each server (default 5 s).
// d must be positive.
func WithConnectTimeout(d time.Duration) ConnectOption {
	return func(o *connectOptions) error {
		if d <= 0 {
			return invalid("WithConnectTimeout", "timeout %s must be positive", d)
		}
		o.Timeout = d
		return nil
	}
}

// WithLogger sets the logger of the connection's disconnects, reconnect
// attempts and reconnects (default: the slog default logger).
func WithLogger(l *slog.Logger) ConnectOption {
	return func(o *connectOptions) error {
		if l == nil {
			return invalid("WithLogger", "logger must not be nil")
		}
		o.Logger = l
		return nil
	}
}

func stringOption(name, v string, set func(*connectOptions)) ConnectOption {
	return func(o *connectOptions) error {
		if v == "" {
			return invalid(name, "must not be empty")
		}
		set(o)
		return nil
	}
}

// Connect connects to NATS as the options say. Without a URL from an
// option, the environment (WithEnv) or a context, it connects to
// nats://127.0.0.1:4222. It never hangs: each server gets the connect
// timeout, shortened to ctx's deadline. Once connected, the connection
// reconnects without limit, with backoff, and logs each disconnect and
// reconnect. A refused connection is a *ConnectError; bad options give an
// error wrapping ErrInvalidOption.
func Connect(ctx context.Context, opts ...ConnectOption) (*Conn, error) {
	o := connectOptions{connect.Options{Name: "ledger-agent", Logger: slog.Default()}}
	for _, opt := range opts {
		if opt == nil {
			return nil, invalid("Connect", "nil option")
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.Getenv != nil {
		o.FromEnv(o.Getenv)
	}
	if o.URL == "" && o.Context == "" {
		o.URL = nats.DefaultURL
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		if o.Timeout == 0 || left < o.Timeout {
			o.Timeout = max(left, time.Millisecond)
		}
	}
	c, err := connect.Open(o.Options)
	var ce *ConnectError
	switch {
	case errors.As(err, &ce):
		return nil, ce
	case errors.Is(err, connect.ErrInvalidOptions):
		return nil, fmt.Errorf("%w: %v", ErrInvalidOption, err)
	case err != nil:
		return nil, err
	}
	return &Conn{c: c}, nil
}
