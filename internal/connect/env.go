package connect

import "github.com/nats-io/nats.go"

// The environment variables of the nats CLI that this package reads.
const (
	EnvURL     = "NATS_URL"
	EnvCreds   = "NATS_CREDS"
	EnvNKey    = "NATS_NKEY"
	EnvCA      = "NATS_CA"
	EnvCert    = "NATS_CERT"
	EnvKey     = "NATS_KEY"
	EnvContext = "NATS_CONTEXT"
)

// FromEnv fills every empty connection setting of o from the environment,
// as getenv (normally os.Getenv) reads it. Settings already set are kept:
// explicit flags win over the environment.
func (o *Options) FromEnv(getenv func(string) string) {
	for _, f := range []struct {
		dst *string
		env string
	}{
		{&o.URL, EnvURL}, {&o.Creds, EnvCreds}, {&o.NKey, EnvNKey},
		{&o.CA, EnvCA}, {&o.Cert, EnvCert}, {&o.Key, EnvKey}, {&o.Context, EnvContext},
	} {
		if *f.dst == "" {
			*f.dst = getenv(f.env)
		}
	}
}

// DefaultURL is the server a command that names none connects to: the
// nats CLI's default.
const DefaultURL = nats.DefaultURL

// ResolveServer fills o from the environment (FromEnv) and, when neither
// a URL nor a context names a server, selects DefaultURL. Commands that
// have no embedded server of their own (the publisher, the gateway) call
// it before Open.
func (o *Options) ResolveServer(getenv func(string) string) {
	o.FromEnv(getenv)
	if o.URL == "" && o.Context == "" {
		o.URL = DefaultURL
	}
}
