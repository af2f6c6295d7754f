package connect

import "flag"

// RegisterFlags registers the nats CLI's connection flags on fs, into o:
// --nats-url, --creds, --nkey, --tls-ca, --tls-cert, --tls-key and
// --context, and --inbox-prefix. Every subcommand of every command takes the same ones; call
// o.FromEnv after parsing for their environment variables.
func RegisterFlags(fs *flag.FlagSet, o *Options) {
	fs.StringVar(&o.URL, "nats-url", "", "NATS server URL, or several comma separated; user:password@ or token@ in it are offered as credentials (default $"+EnvURL+")")
	fs.StringVar(&o.Creds, "creds", "", "JWT creds `file` of a NATS user (default $"+EnvCreds+")")
	fs.StringVar(&o.NKey, "nkey", "", "NKEY seed `file` (default $"+EnvNKey+")")
	fs.StringVar(&o.CA, "tls-ca", "", "PEM `file` of the CA that signed the server's certificate (default $"+EnvCA+")")
	fs.StringVar(&o.Cert, "tls-cert", "", "PEM `file` of the client certificate, for mutual TLS (default $"+EnvCert+")")
	fs.StringVar(&o.Key, "tls-key", "", "PEM `file` of the client certificate's key (default $"+EnvKey+")")
	fs.StringVar(&o.InboxPrefix, "inbox-prefix", "", "`prefix` of this connection's reply subjects instead of _INBOX, so that its NATS user can be granted its own replies only (see docs/security.md; default: the context's inbox_prefix, else _INBOX)")
	fs.StringVar(&o.Context, "context", "", "nats CLI context `name` (~/.config/nats/context/NAME.json) or path to its .json file; flags win over its settings (default $"+EnvContext+")")
}
