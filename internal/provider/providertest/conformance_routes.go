package providertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/provider"
)

// testUpstream checks the provider's name and Upstream: the name follows
// provider.ValidateName and is the Features', the origin is an absolute
// http(s) URL with no query, fragment, user or trailing slash, and the
// credential headers are canonical header names.
func testUpstream(t suiteT, p provider.Provider, f *Features) {
	name := p.Name()
	assert.NoError(t, provider.ValidateName("Name()", name))
	if f.Name == "" {
		t.Errorf("Features.Name is empty: name the provider the tables are for")
	} else {
		assert.Equal(t, f.Name, name, "the provider under test is not the one the Features are for")
	}

	u := p.Upstream()
	o, err := url.Parse(u.Origin)
	if assert.NoError(t, err, "Upstream.Origin %q", u.Origin) {
		assert.Contains(t, []string{"http", "https"}, o.Scheme, "Upstream.Origin %q: scheme", u.Origin)
		assert.NotEmpty(t, o.Host, "Upstream.Origin %q: host", u.Origin)
		assert.Nil(t, o.User, "Upstream.Origin %q: no credential in the URL", u.Origin)
		assert.Empty(t, o.RawQuery+o.Fragment, "Upstream.Origin %q: no query or fragment", u.Origin)
		assert.False(t, strings.HasSuffix(o.Path, "/"), "Upstream.Origin %q: the path prefix has no trailing slash (the request's path, which starts with one, is appended)", u.Origin)
	}

	if assert.NotEmpty(t, u.CredentialHeaders, "Upstream.CredentialHeaders") {
		seen := map[string]bool{}
		for _, h := range u.CredentialHeaders {
			assert.True(t, isToken(h), "Upstream.CredentialHeaders: %q is not a header name", h)
			assert.Equal(t, http.CanonicalHeaderKey(h), h, "Upstream.CredentialHeaders: names are canonical")
			assert.False(t, seen[h], "Upstream.CredentialHeaders: %q twice", h)
			seen[h] = true
		}
	}
	if u.RequestIDHeader != "" {
		assert.True(t, isToken(u.RequestIDHeader), "Upstream.RequestIDHeader %q is not a header name", u.RequestIDHeader)
	}
	if u.CredentialQuery != "" {
		assert.Equal(t, url.QueryEscape(u.CredentialQuery), u.CredentialQuery, "Upstream.CredentialQuery %q needs no escaping", u.CredentialQuery)
	}
	if u.Passthrough != nil {
		paths := []string{"/", "/v1/models"}
		for _, rc := range f.Routes {
			paths = append(paths, rc.Path)
		}
		for _, path := range paths {
			for _, method := range []string{http.MethodGet, http.MethodPost} {
				r := httptest.NewRequest(method, path, nil)
				noPanic(t, "Upstream.Passthrough("+method+" "+path+")", func() { u.Passthrough(r) })
			}
		}
	}
}

// isToken reports whether s is an HTTP token (a header name).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// testRoutes checks the Features' routes and the paths that must not
// match.
func testRoutes(t suiteT, p provider.Provider, f *Features) {
	required(t, "Routes", len(f.Routes))
	for _, rc := range f.Routes {
		rt, ok := match(t, p, rc.Path)
		if assert.True(t, ok, "Match(%q): an accounted path", rc.Path) {
			assert.Equal(t, rc.Want, rt, "Match(%q)", rc.Path)
			assert.NotEmpty(t, rt.Endpoint, "Match(%q): the route names its endpoint", rc.Path)
		}
	}
	for _, path := range f.NotRoutes {
		_, ok := match(t, p, path)
		assert.False(t, ok, "Match(%q): not an accounted path", path)
	}
}

// testRouteInvariants checks what every provider's Match does: it matches
// no empty or root path, no accounted path with more after it or
// something before it, and never panics on an odd path.
func testRouteInvariants(t suiteT, p provider.Provider, f *Features) {
	for _, path := range []string{"", "/", "//", "/v1", "/v1/", "%", "/\x00", "/\xff", strings.Repeat("/a", 2000)} {
		_, ok := match(t, p, path)
		assert.False(t, ok, "Match(%q)", path)
	}
	for _, rc := range f.Routes {
		for _, path := range []string{rc.Path + "/", rc.Path + "/extra", "/extra" + rc.Path} {
			_, ok := match(t, p, path)
			assert.False(t, ok, "Match(%q): an accounted path is matched exactly", path)
		}
	}
}

// match calls p.Match, failing t rather than panicking.
func match(t suiteT, p provider.Provider, path string) (rt provider.Route, ok bool) {
	t.Helper()
	noPanic(t, "Match("+describe([]byte(path))+")", func() { rt, ok = p.Match(path) })
	return rt, ok
}

// inspect calls p.Inspect on a copy of body, and fails t when Inspect
// panics or writes to the body it was given.
func inspect(t suiteT, p provider.Provider, rt provider.Route, body []byte) (req provider.Request) {
	t.Helper()
	in := bytes.Clone(body)
	noPanic(t, "Inspect("+describe(body)+")", func() { req = p.Inspect(rt, in) })
	assert.Equal(t, body, in, "Inspect wrote to the body it was given")
	return req
}

// mustMatch returns the route of an accounted path of the Features.
func mustMatch(t suiteT, p provider.Provider, path string) provider.Route {
	t.Helper()
	rt, ok := match(t, p, path)
	require.True(t, ok, "Match(%q): the Features name it as an accounted path", path)
	return rt
}

// testRequests checks what Inspect reads of the Features' requests, and
// that it changes a body only to add the usage option.
func testRequests(t suiteT, p provider.Provider, f *Features) {
	required(t, "Requests", len(f.Requests))
	for _, rc := range f.Requests {
		t.Run(rc.Name, func(t suiteT) {
			rt := mustMatch(t, p, rc.Path)
			got := inspect(t, p, rt, []byte(rc.Body))
			assert.Equal(t, rc.Model, got.Model, "model")
			assert.Equal(t, rc.Stream, got.Stream, "stream")
			assert.Equal(t, rc.InjectedUsage, got.InjectedUsage, "injected usage")
			switch {
			case !rc.InjectedUsage:
				assert.Equal(t, rc.Body, string(got.Body), "Inspect changed a body it added no usage option to")
			case rc.Sent != "":
				assert.Equal(t, rc.Sent, string(got.Body), "the body sent upstream")
			default:
				assert.NotEqual(t, rc.Body, string(got.Body), "Inspect says it added the usage option, and the body is the same")
			}
			if rc.InjectedUsage {
				checkAdded(t, got.Body, "Inspect(%s)", rc.Body)
			}
		})
	}
}

// notJSON are request, response and event bodies that are not JSON.
var notJSON = []string{"", " ", "not json", "{", `{"model":`, "<html><body>upstream connect error</body></html>", "\xff\xfe\x00", `{"a":1}}`}

// oddJSON are JSON bodies of unexpected shapes.
var oddJSON = []string{"null", "[]", "0", `"text"`, "{}", `{"model":123,"stream":"yes"}`, `{"model":null,"stream":null}`,
	`{"stream":true,"stream_options":7}`, `{"stream":true,"stream_options":null}`, `{"stream":true,"stream_options":{"include_usage":"maybe"}}`,
	`{"error":null}`, `{"error":"text"}`, `{"error":{}}`, `{"usage":null}`, `{"usage":{}}`, `{"usage":7}`}

// garbage returns n pseudo-random byte strings that are not JSON; the seed
// is fixed, so that a failure replays.
func garbage(n int) [][]byte {
	r := rand.New(rand.NewPCG(18, 2026))
	var out [][]byte
	for len(out) < n {
		b := make([]byte, 1+r.IntN(64))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		if !json.Valid(b) {
			out = append(out, b)
		}
	}
	return out
}

// testRequestInvariants checks what every provider's Inspect does: it
// never panics, and returns a body that is not JSON as it is, adding
// nothing to it.
func testRequestInvariants(t suiteT, p provider.Provider, f *Features) {
	var bad [][]byte
	for _, s := range notJSON {
		bad = append(bad, []byte(s))
	}
	bad = append(bad, garbage(16)...)
	for _, rc := range f.Routes {
		rt, ok := match(t, p, rc.Path)
		if !ok {
			continue // testRoutes says so
		}
		for _, b := range bad {
			got := inspect(t, p, rt, b)
			assert.Equal(t, b, got.Body, "Inspect(%s, %s): a body that is not JSON goes upstream as it is", rc.Path, describe(b))
			assert.False(t, got.InjectedUsage, "Inspect(%s, %s): nothing added to a body that is not JSON", rc.Path, describe(b))
		}
		for _, s := range oddJSON {
			got := inspect(t, p, rt, []byte(s))
			if got.InjectedUsage {
				checkAdded(t, got.Body, "Inspect(%s, %s)", rc.Path, s)
			} else {
				assert.Equal(t, s, string(got.Body), "Inspect(%s, %s) changed a body it added no usage option to", rc.Path, s)
			}
		}
	}
}

// checkAdded fails t when a body Inspect added the usage option to is not
// JSON, or names a member twice: most decoders keep the last, so an
// option added before the client's own would be lost.
func checkAdded(t suiteT, body []byte, format string, args ...any) {
	t.Helper()
	if !json.Valid(body) {
		t.Errorf("%s: the body with the usage option is not JSON: %s", fmt.Sprintf(format, args...), body)
		return
	}
	if k, ok := duplicateMember(body); ok {
		t.Errorf("%s: the body with the usage option names %q twice, and a decoder keeps one of them: %s", fmt.Sprintf(format, args...), k, body)
	}
}

// duplicateMember returns a member name that an object of the JSON
// document b has twice.
func duplicateMember(b []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	type frame struct {
		object bool
		keys   map[string]bool
		key    bool // the next string token of an object is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				if top != nil && top.object {
					top.key = true
				}
				stack = append(stack, &frame{object: true, keys: map[string]bool{}, key: true})
			case '[':
				if top != nil && top.object {
					top.key = true
				}
				stack = append(stack, &frame{})
			default:
				stack = stack[:len(stack)-1]
			}
			continue
		case string:
			if top != nil && top.object && top.key {
				if top.keys[v] {
					return v, true
				}
				top.keys[v] = true
				top.key = false
				continue
			}
		}
		if top != nil && top.object {
			top.key = true
		}
	}
}
