package connect

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
