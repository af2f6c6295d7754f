package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/retry"
)

// keyFileFor is a key file with two clients: "team-a" (its key holds the
// provider credentials, sessions start with "team-a-") and "team-b"
// (fixed session, no credentials: the client sends its own).
func keyFileFor(t *testing.T, keyA, keyB string) *Keys {
	t.Helper()
	sum := func(k string) string { s := sha256.Sum256([]byte(k)); return hex.EncodeToString(s[:]) }
	ks, err := ParseKeys(strings.NewReader(`{"keys":[
		{"name":"team-a","sha256":"`+sum(keyA)+`","session_prefix":"team-a-","labels":{"team":"a"},
		 "credentials":{"anthropic":{"env":"A_ANTHROPIC"},"openai":{"value":"sk-openai-of-team-a"},"gemini":{"value":"gm-key-of-team-a"}}},
		{"name":"team-b","sha256":"`+sum(keyB)+`","session":"team-b-run","account":"acme"}
	]}`), func(k string) string { return map[string]string{"A_ANTHROPIC": "sk-ant-of-team-a"}[k] })
	require.NoError(t, err)
	return ks
}

// Issue 17 item 3: with keys, a call without a key, or with a key the
// gateway does not have, is refused with 401 and never reaches the
// upstream nor the ledger; the refusal is logged at WARN without the key.
// A known key's call goes upstream with the key's own credential, and the
// client key never leaves the gateway.
func TestClientKeys(t *testing.T) {
	keyA, _, err := NewKey()
	require.NoError(t, err)
	keyB, _, err := NewKey()
	require.NoError(t, err)
	up := startScripted(t, reply(200, anthropicOK))
	h := newHarness(t, up.srv.URL, func(c *Config) { c.Keys = keyFileFor(t, keyA, keyB) })

	for name, kv := range map[string][]string{
		"no key":           {"X-Api-Key", "sk-ant-someone-elses"},
		"unknown key":      {"X-Api-Key", "lk-not-a-key-of-this-gateway"},
		"unknown in hdr":   {HeaderKey, "lk-guess"},
		"no header at all": nil,
	} {
		resp := h.post("/v1/messages", anthropicBody, kv...)
		assert.Equal(t, 401, resp.StatusCode, name)
		assert.Equal(t, "unauthenticated", resp.Header.Get(HeaderGatewayError), name)
		body, _ := read(resp)
		assert.Contains(t, body, "authentication_error", name)
	}
	resp := h.post("/v1/models", "", "Authorization", "Bearer sk-unknown")
	assert.Equal(t, 401, resp.StatusCode, "what is not accounted needs a key too")
	assert.Empty(t, up.requests())
	assert.Empty(t, h.events())
	logs := h.logs.String()
	assert.Contains(t, logs, `"level":"WARN","msg":"gateway: request refused"`)
	assert.Contains(t, logs, `"reason":"unauthenticated"`)
	assert.NotContains(t, logs, "lk-not-a-key")
	assert.NotContains(t, logs, "lk-guess")

	// Team A presents its key as each provider's API key; the upstream
	// gets team A's credential in that provider's header, never the key.
	for _, tc := range []struct {
		path, body string
		kv         []string
		header     string
		want       string
	}{
		{"/v1/messages", anthropicBody, []string{"X-Api-Key", keyA}, "X-Api-Key", "sk-ant-of-team-a"},
		{"/v1/chat/completions", `{"model":"gpt-x","messages":[]}`, []string{"Authorization", "Bearer " + keyA}, "Authorization", "Bearer sk-openai-of-team-a"},
		{"/v1beta/models/gemini-x:generateContent", `{}`, []string{"X-Goog-Api-Key", keyA}, "X-Goog-Api-Key", "gm-key-of-team-a"},
		{"/v1beta/models/gemini-x:generateContent?key=" + keyA, `{}`, nil, "X-Goog-Api-Key", "gm-key-of-team-a"},
	} {
		n := len(up.requests())
		h.post(tc.path, tc.body, tc.kv...)
		reqs := up.requests()
		require.Len(t, reqs, n+1, tc.path)
		got := reqs[n]
		assert.Equal(t, tc.want, got.Header.Get(tc.header), tc.path)
		for k, vs := range got.Header {
			for _, v := range vs {
				assert.NotContains(t, v, keyA, "header %s", k)
			}
		}
		assert.NotContains(t, got.URL.RawQuery, keyA)
	}
	for _, ev := range h.events() {
		assert.True(t, strings.HasPrefix(ev.SessionID, "team-a-"), ev.SessionID)
	}

	// Team B's key holds no credential: the client sends its own provider
	// key, and the client key in X-Ledger-Key, which stays at the gateway.
	n := len(up.requests())
	resp = h.post("/v1/messages", anthropicBody, "X-Api-Key", "sk-ant-own-of-team-b", HeaderKey, keyB)
	assert.Equal(t, 200, resp.StatusCode)
	got := up.requests()[n]
	assert.Equal(t, "sk-ant-own-of-team-b", got.Header.Get("X-Api-Key"))
	assert.Empty(t, got.Header.Get(HeaderKey))
	evs := h.events()
	assert.Equal(t, "team-b-run", evs[len(evs)-1].SessionID, "the key's fixed session")
	assert.NotContains(t, h.logs.String(), keyA)
	assert.NotContains(t, h.logs.String(), keyB)
}

// A key that fixes or constrains the session refuses a session it does
// not allow with 403, before any attempt.
func TestKeySessionRules(t *testing.T) {
	keyA, _, _ := NewKey()
	keyB, _, _ := NewKey()
	up := startScripted(t, reply(200, anthropicOK))
	h := newHarness(t, up.srv.URL, func(c *Config) { c.Keys = keyFileFor(t, keyA, keyB) })
	for _, tc := range []struct {
		key, session string
		status       int
	}{
		{keyA, "team-a-run-1", 200},
		{keyA, "team-b-run", 403},
		{keyB, "team-b-run", 200},
		{keyB, "team-b-other", 403},
	} {
		resp := h.post("/v1/messages", anthropicBody, "X-Api-Key", tc.key, HeaderSessionID, tc.session)
		assert.Equal(t, tc.status, resp.StatusCode, tc.session)
		if tc.status == 403 {
			assert.Equal(t, "session_forbidden", resp.Header.Get(HeaderGatewayError))
		}
	}
	assert.Len(t, up.requests(), 2)
	resp := h.post("/v1/messages", anthropicBody, "X-Api-Key", keyA)
	assert.Equal(t, 200, resp.StatusCode)
	evs := h.events()
	assert.Equal(t, "team-a-"+DefaultSession, evs[len(evs)-1].SessionID)
}

// Without keys, a client key header never goes upstream, and the client's
// credentials go as they came.
func TestNoKeysPassesCredentials(t *testing.T) {
	up := startScripted(t, reply(200, anthropicOK))
	h := newHarness(t, up.srv.URL, nil)
	resp := h.post("/v1/messages", anthropicBody, "X-Api-Key", "sk-ant-mine-123", HeaderKey, "lk-whatever")
	assert.Equal(t, 200, resp.StatusCode)
	got := up.requests()[0]
	assert.Equal(t, "sk-ant-mine-123", got.Header.Get("X-Api-Key"))
	assert.Empty(t, got.Header.Get(HeaderKey))
}

// A key file is refused, naming the entry and the field, when it breaks
// a rule.
func TestParseKeysRefuses(t *testing.T) {
	const h = `"sha256":"` + "0000000000000000000000000000000000000000000000000000000000000000" + `"`
	env := func(string) string { return "" }
	for _, tc := range []struct {
		name, file string
		want       []string
	}{
		{"empty", `{"keys":[]}`, []string{"empty"}},
		{"two values", `{"keys":[{"name":"a",` + h + `}]} {}`, []string{"one object"}},
		{"unknown member", `{"keys":[{"name":"a",` + h + `,"sesion":"x"}]}`, []string{"sesion"}},
		{"bad name", `{"keys":[{"name":"a b",` + h + `}]}`, []string{"keys[0]", "name"}},
		{"bad hash", `{"keys":[{"name":"a","sha256":"abc"}]}`, []string{"keys[0]", "sha256"}},
		{"both sessions", `{"keys":[{"name":"a",` + h + `,"session":"s","session_prefix":"p"}]}`, []string{"session_prefix"}},
		{"bad provider name", `{"keys":[{"name":"a",` + h + `,"credentials":{"Azure OpenAI":{"value":"x"}}}]}`, []string{"Azure OpenAI", "credentials"}},
		{"unset env", `{"keys":[{"name":"a",` + h + `,"credentials":{"openai":{"env":"NOPE"}}}]}`, []string{"credentials.openai", "NOPE"}},
		{"client key as credential", `{"keys":[{"name":"a",` + h + `,"credentials":{"openai":{"value":"lk-x"}}}]}`, []string{"credentials.openai"}},
		{"same hash", `{"keys":[{"name":"a",` + h + `},{"name":"b",` + h + `}]}`, []string{"keys[1]", "a's"}},
		{"same name", `{"keys":[{"name":"a",` + h + `},{"name":"a","sha256":"` + strings.Repeat("1", 64) + `"}]}`, []string{"keys[1]", "twice"}},
	} {
		_, err := ParseKeys(strings.NewReader(tc.file), env)
		require.ErrorIs(t, err, ErrInvalidKeys, tc.name)
		for _, w := range tc.want {
			assert.Contains(t, err.Error(), w, tc.name)
		}
	}
}

// A key whose credentials name a provider the gateway does not have is
// refused by New, naming the field, the key and the provider: its
// credential would never be sent.
func TestKeysNameTheGatewaysProviders(t *testing.T) {
	h := `"sha256":"` + strings.Repeat("0", 64) + `"`
	keys, err := ParseKeys(strings.NewReader(`{"keys":[{"name":"a",`+h+`,"credentials":{"openai":{"value":"sk-1"},"azure":{"value":"x"}}}]}`), func(string) string { return "" })
	require.NoError(t, err, "the file names a provider by the rule; which providers exist is the gateway's")
	_, err = New(Config{Retry: retry.Options{Sink: retry.NewMemorySink()}, Keys: keys})
	require.Error(t, err)
	for _, w := range []string{"Keys", "a", `"azure"`, "anthropic, gemini, openai"} {
		assert.Contains(t, err.Error(), w)
	}
}

// A key printed or logged shows its name, never its credentials.
func TestKeyNeverPrintsItsCredentials(t *testing.T) {
	ks := keyFileFor(t, "lk-a", "lk-b")
	k := ks.lookup("lk-a")
	require.NotNil(t, k)
	var buf strings.Builder
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "key", k)
	for _, s := range []string{fmt.Sprint(k), fmt.Sprintf("%+v %#v", *k, *k), fmt.Sprintf("%v %+v %#v %s", k, k, k, k), buf.String()} {
		assert.Contains(t, s, "team-a")
		assert.NotContains(t, s, "sk-")
		assert.NotContains(t, s, "gm-key")
	}
}

var _ http.Handler = (*Gateway)(nil)
