// Package connect owns how every command, and the public ledger package,
// reach NATS: the nats CLI's flags and environment variables (--nats-url
// or NATS_URL, --creds or NATS_CREDS, --nkey or NATS_NKEY, --tls-ca or
// NATS_CA, --tls-cert or NATS_CERT, --tls-key or NATS_KEY, --context or
// NATS_CONTEXT, --inbox-prefix), user and password or a token in the URL, and, for the
// aggregator when no server is named anywhere, an embedded server that
// it starts itself (Options.Embed).
//
// # Precedence
//
// A setting given explicitly (a flag, an option) wins over the
// environment, and the environment wins over the saved context named by
// --context. When any credential (a creds file, an NKEY seed, or a user or
// token in the URL) is given explicitly or by the environment, the
// context's credentials are not used at all, so that two kinds of
// credentials are never offered at once. The nats CLI's selected context
// (context.txt) is never used implicitly: a command that names no server
// must not reach whatever server the shell last selected.
//
// # Contexts
//
// A context is the nats CLI's JSON file ~/.config/nats/context/NAME.json
// (under $XDG_CONFIG_HOME when set); a --context value that is a path to a
// .json file is read as it is. This package reads the file itself rather
// than through github.com/nats-io/jsm.go/natscontext, whose package pulls
// in the whole jsm.go module (its expression engine, table printers,
// nats-server's certificate store and more) for a dozen JSON fields. It
// reads url, user, password, token, creds, nkey, cert, key, ca, tls_first,
// inbox_prefix, jetstream_domain and jetstream_api_prefix, expands ~ and
// $VAR in the paths as the CLI does, and refuses, naming the field, a
// context that relies on what it does not implement (nsc look-ups, op://,
// nsc://, env:// or data: secrets, a SOCKS proxy, a Windows certificate
// store, an inline user JWT), instead of connecting without it.
//
// # Inbox prefix
//
// --inbox-prefix (Options.InboxPrefix, else the context's inbox_prefix)
// replaces _INBOX as the prefix of the connection's reply subjects, so
// that each role of docs/security.md subscribes to its own replies only.
//
// # Permission violations
//
// The server refuses a publish or a subscription the user lacks with an
// asynchronous error; a request on that subject would only time out.
// Every violation is logged at ERROR, and the first is kept: Conn.Guard
// gives a context that ends at once with the *PermissionError as its
// cause, and Conn.Explain puts that error, which names the subject, in
// place of the timeout or cancellation it caused.
//
// # Failures
//
// Connecting never hangs: each server gets Timeout (default 5s) to answer.
// A refused connection is an *Error that names the server (without
// secrets), what the client offered (the kind of credential, the file it
// came from, the NKEY or JWT subject, the CA and client certificate), and
// what the server refused. Once connected, reconnects are unlimited, with
// an exponential backoff (ReconnectDelay) and a log record for every
// disconnect, failed attempt and reconnect.
package connect
