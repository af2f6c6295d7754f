package gateway

import (
	"cmp"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The model a request names, as the events record it: valid UTF-8, 1 to
// events.MaxModelLength bytes, "unknown" for none.
func TestModelName(t *testing.T) {
	assert.Equal(t, unknownModel, modelName(""))
	assert.Equal(t, "m", modelName(" m "))
	long := modelName(strings.Repeat("é", 200))
	assert.LessOrEqual(t, len(long), 256)
	assert.True(t, strings.HasPrefix(long, "é"))
	assert.True(t, utf8.ValidString(long))
	assert.Equal(t, "a\uFFFDb", modelName("a\xffb"))
}

func TestIdentify(t *testing.T) {
	req := func(kv ...string) *http.Request {
		r := httptest.NewRequest("POST", "/v1/messages", nil)
		for i := 0; i+1 < len(kv); i += 2 {
			r.Header.Set(kv[i], kv[i+1])
		}
		return r
	}
	ids, err := identify(req(), "dflt", nil)
	require.NoError(t, err)
	assert.Equal(t, callIDs{session: "dflt"}, ids)

	ids, err = identify(req(HeaderSessionID, "s1", HeaderRequestID, "r1", HeaderIdempotencyKey, "k1"), "dflt", nil)
	require.NoError(t, err)
	assert.Equal(t, callIDs{session: "s1", request: "r1"}, ids, "the request header wins over the key")

	ids, err = identify(req(HeaderIdempotencyKey, "k1"), "dflt", nil)
	require.NoError(t, err)
	assert.Equal(t, "k1", ids.request)

	_, err = identify(req(HeaderSessionID, "a b"), "dflt", nil)
	require.ErrorContains(t, err, HeaderSessionID)
	_, err = identify(req(HeaderRequestID, "r.1"), "dflt", nil)
	require.ErrorContains(t, err, HeaderRequestID)
	_, err = identify(req(), "bad default", nil)
	require.ErrorContains(t, err, "default session")

	a, b := idempotencyRequestID("same key!"), idempotencyRequestID("same key!")
	assert.Equal(t, a, b)
	assert.Len(t, a, len("idem-")+32)
	assert.NotEqual(t, a, idempotencyRequestID("other key!"))
}

func TestUpstreamHeader(t *testing.T) {
	in := http.Header{}
	in.Set("Authorization", "Bearer k")
	in.Set("Connection", "keep-alive, X-Hop")
	in.Set("X-Hop", "1")
	in.Set("Accept-Encoding", "br")
	in.Set(HeaderSessionID, "s")
	in.Set("Anthropic-Beta", "x")
	out := upstreamHeader(in)
	assert.Equal(t, "Bearer k", out.Get("Authorization"))
	assert.Equal(t, "x", out.Get("Anthropic-Beta"))
	for _, k := range []string{"Connection", "X-Hop", "Accept-Encoding", HeaderSessionID} {
		assert.Empty(t, out.Get(k), k)
	}
	assert.Equal(t, "s", in.Get(HeaderSessionID), "the client's headers are not changed")
}

func TestParseOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"https://api.openai.com":       "https://api.openai.com",
		"http://127.0.0.1:9090":        "http://127.0.0.1:9090",
		"http://h:1/":                  "http://h:1",
		"http://127.0.0.1:9090/openai": "http://127.0.0.1:9090/openai",
		"https://api.groq.com/openai/": "https://api.groq.com/openai",
		"http://h/a%2Fb":               "http://h/a%2Fb",
	} {
		u, err := ParseOrigin(in)
		if assert.NoError(t, err, in) {
			assert.Equal(t, want, u.String(), in)
		}
	}
	for _, bad := range []string{"api.openai.com", "ftp://h", "http://h?x=1", "http://h/p?", "http://h/#f", "http://u:p@h", "http://"} {
		_, err := ParseOrigin(bad)
		assert.Error(t, err, bad)
	}
}

func TestSecretsRedact(t *testing.T) {
	r := httptest.NewRequest("POST", "/v1beta/models/m:generateContent?key=AIzaSECRETKEY123", nil)
	r.Header.Set("Authorization", "Bearer sk-proj-SECRET-1")
	r.Header.Set("X-Api-Key", "sk-ant-SECRET-2")
	r.Header.Set("X-Goog-Api-Key", "short")
	s := testMounts(t).secretsOf(r)
	msg := s.redact("saw Bearer sk-proj-SECRET-1 and sk-ant-SECRET-2 and sk-proj-SECRET-1 at ?key=AIzaSECRETKEY123")
	assert.NotContains(t, msg, "SECRET")
	assert.Equal(t, "ordinary words", s.redact("ordinary words"))
}

// Keys of any length are redacted (a 7-character one was not), and so is
// the value of a key query parameter however a message encodes it (a
// percent-encoded ?key= echoed by the upstream was not).
func TestRedactShortAndEncodedKeys(t *testing.T) {
	tests := []struct {
		name, target, header, msg string
		gone                      []string // must not remain
		want                      string   // the whole result, when set
	}{
		{name: "7-character header key", header: "abc1234", msg: "invalid x-api-key abc1234 given", gone: []string{"abc1234"},
			want: "invalid x-api-key [REDACTED] given"},
		{name: "3-character header key", header: "k3y", msg: "bad key: k3y", gone: []string{"k3y"}},
		{name: "short query key", target: "/v1beta/models/m:generateContent?key=s3cr", msg: "invalid API key s3cr", gone: []string{"s3cr"}},
		{name: "query key percent-encoded in the message", target: "/v1beta/models/m:generateContent?key=AIza%2FSECRET%2B1",
			msg: "GET https://x/v1beta%3Fkey%3DAIza%252FSECRET%252B1 failed", gone: []string{"SECRET"}},
		{name: "the request's key quoted encoded", target: "/v1beta/models/m:generateContent?key=AIza%2FSECRET%2B1",
			msg: "key AIza%2FSECRET%2B1 is invalid", gone: []string{"SECRET"}},
		{name: "upstream echo, not the request's key", msg: "see https://h/v1beta/models/m?alt=sse&key=OTHERSECRET now",
			want: "see https://h/v1beta/models/m?alt=sse&key=[REDACTED] now"},
		{name: "encoded ?key=", msg: "url%3Fkey%3DOTHERSECRET%26alt%3Dsse", want: "url%3Fkey%3D[REDACTED]%26alt%3Dsse"},
		{name: "mixed case", msg: "u?KeY=OTHERSECRET", want: "u?KeY=[REDACTED]"},
		{name: "mixed-case encoding", msg: "u%3fKEY%3dOTHERSECRET", want: "u%3fKEY%3d[REDACTED]"},
		{name: "double-encoded", msg: "u%253Fkey%253DOTHERSECRET%2526x", want: "u%253Fkey%253D[REDACTED]%2526x"},
		{name: "JSON-escaped &", msg: `{"url":"u?a=1\u0026key=OTHERSECRET"}`, want: `{"url":"u?a=1\u0026key=[REDACTED]"}`},
		{name: "HTML-escaped &", msg: "u?a=1&amp;key=OTHERSECRET", want: "u?a=1&amp;key=[REDACTED]"},
		{name: "other parameters kept", msg: "u?monkey=1&keys=2&key=OTHERSECRET&alt=sse", want: "u?monkey=1&keys=2&key=[REDACTED]&alt=sse"},
		{name: "no key", msg: "ordinary words, key words", want: "ordinary words, key words"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := cmp.Or(tt.target, "/v1/messages")
			r := httptest.NewRequest("POST", target, nil)
			if tt.header != "" {
				r.Header.Set("X-Api-Key", tt.header)
			}
			got := testMounts(t).secretsOf(r).redact(tt.msg)
			for _, g := range append(tt.gone, "OTHERSECRET") {
				assert.NotContains(t, got, g)
			}
			if tt.want != "" {
				assert.Equal(t, tt.want, got)
			}
		})
	}
}

func TestSanitize(t *testing.T) {
	assert.Equal(t, usage(10, 0, 10, 0), sanitize(usage(10, -5, 50, 7)))
	assert.Equal(t, usage(1_000_000_000_000, 3, 0, 0), sanitize(usage(2_000_000_000_000, 3, 0, 0)))
	assert.Equal(t, usage(100, 1, 60, 40), sanitize(usage(100, 1, 60, 70)))
}
