package connect

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeContext saves a nats CLI context named name under root (as
// $XDG_CONFIG_HOME) and returns its path.
func writeContext(t *testing.T, root, name string, fields map[string]any) string {
	t.Helper()
	dir := filepath.Join(root, "nats", "context")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	data, err := json.Marshal(fields)
	require.NoError(t, err)
	path := filepath.Join(dir, name+".json")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	return path
}

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestContextConnects(t *testing.T) {
	seed, pub := seedFile(t)
	p := newPKI(t)
	url := startServer(t, &server.Options{Nkeys: []*server.NkeyUser{{Nkey: pub}}, TLSConfig: p.serverTLS(t, false), TLS: true})
	root := t.TempDir()
	getenv := envOf(map[string]string{"XDG_CONFIG_HOME": root, "SEEDS": filepath.Dir(seed)})
	// The fields the nats CLI writes, with a $VAR and a file:// URI.
	writeContext(t, root, "prod", map[string]any{
		"description": "the fleet's NATS", "url": url, "nkey": "$SEEDS/" + filepath.Base(seed),
		"ca": "file://" + p.caFile, "color_scheme": "", "nsc": "", "user_jwt": "",
	})

	_, err := open(t, Options{Context: "prod", Getenv: getenv})
	require.NoError(t, err)

	// A path to the file works as well as a name.
	_, err = open(t, Options{Context: filepath.Join(root, "nats", "context", "prod.json"), Getenv: getenv})
	require.NoError(t, err)

	// Explicit settings win: a wrong seed given as a flag replaces the
	// context's credentials, and the error says which one was offered.
	wrong, _ := seedFile(t)
	_, err = open(t, Options{Context: "prod", NKey: wrong, Getenv: getenv})
	refusedWith(t, err, url, []string{wrong, "CA file " + p.caFile}, []string{"refused the credentials"})
}

func TestContextRefusals(t *testing.T) {
	root := t.TempDir()
	getenv := envOf(map[string]string{"XDG_CONFIG_HOME": root})
	tests := []struct {
		name   string
		fields map[string]any
		want   string
	}{
		{"nsc lookup", map[string]any{"url": "nats://127.0.0.1:1", "nsc": "nsc://op/acc/user"}, `field "nsc"`},
		{"1password secret", map[string]any{"url": "nats://127.0.0.1:1", "creds": "op://vault/item/creds"}, `field "creds" uses a op: reference`},
		{"env secret", map[string]any{"url": "nats://127.0.0.1:1", "user": "a", "password": "env://PW"}, `field "password" uses a env: reference`},
		{"socks proxy", map[string]any{"url": "nats://127.0.0.1:1", "socks_proxy": "127.0.0.1:1080"}, `field "socks_proxy"`},
		{"domain and prefix", map[string]any{"jetstream_domain": "hub", "jetstream_api_prefix": "x"}, "give one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := strings.ReplaceAll(tt.name, " ", "-")
			writeContext(t, root, name, tt.fields)
			_, err := Open(Options{Context: name, Getenv: getenv})
			require.ErrorIs(t, err, ErrInvalidOptions)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	_, err := Open(Options{Context: "missing", Getenv: getenv})
	require.ErrorIs(t, err, ErrInvalidOptions)
	assert.Contains(t, err.Error(), `context "missing"`)
	_, err = Open(Options{Context: "../etc", Getenv: getenv})
	require.ErrorIs(t, err, ErrInvalidOptions)
}

func TestFromEnv(t *testing.T) {
	o := Options{URL: "nats://flag:4222"}
	o.FromEnv(envOf(map[string]string{EnvURL: "nats://env:4222", EnvCreds: "/c", EnvNKey: "/n", EnvCA: "/ca", EnvCert: "/cert", EnvKey: "/key", EnvContext: "ctx"}))
	assert.Equal(t, Options{URL: "nats://flag:4222", Creds: "/c", NKey: "/n", CA: "/ca", Cert: "/cert", Key: "/key", Context: "ctx"}, o)
}

func TestMergeUsesNoContextCredentialsOnceOneIsGiven(t *testing.T) {
	c := &natsContext{URL: "nats://ctx:4222", User: "u", Password: "p", CA: "/ctx-ca", path: "/x.json"}
	s := merge(Options{URL: "nats://tok@flag:4222"}, c)
	assert.Equal(t, "nats://tok@flag:4222", s.urls)
	assert.Empty(t, s.user, "a token in the URL replaces the context's user")
	assert.Equal(t, "/ctx-ca", s.ca, "TLS settings are merged one by one")
	s = merge(Options{}, c)
	assert.Equal(t, "u", s.user)
	assert.Equal(t, "nats://ctx:4222", s.urls)
}
