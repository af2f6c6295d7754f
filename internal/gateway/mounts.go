package gateway

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/agentledger/ledger/internal/provider"
)

// upstream is one provider the gateway speaks for: the provider, what it
// said of its API (read once), and its origin.
type upstream struct {
	p      provider.Provider
	name   string
	up     provider.Upstream
	origin *url.URL
	// credentials are the credential headers to read the client's
	// credential from, the provider's own first; queries the query
	// parameters, likewise.
	credentials, queries []string
}

// mounts are the gateway's providers: by name (each served under
// /NAME/) and those at the root (in the registry's order).
type mounts struct {
	byName map[string]*upstream
	root   []*upstream
	// credentialHeaders and credentialQueries are every provider's
	// (canonical header names; query parameter names), for the client
	// key's lookup and removal and the redaction of credentials.
	credentialHeaders, credentialQueries []string
	// paramPattern matches the credential query parameters in a message
	// (secrets.redact); nil when there are none.
	paramPattern *regexp.Regexp
}

// newMounts reads the providers of reg, with the origins of origins (by
// provider name) in place of their own.
func newMounts(reg *provider.Registry, origins map[string]string) (*mounts, error) {
	all := reg.All()
	if len(all) == 0 {
		return nil, fmt.Errorf("Providers: the registry holds no provider (link the built-in ones with internal/provider/builtin, or add some)")
	}
	m := &mounts{byName: make(map[string]*upstream, len(all))}
	for name := range origins {
		if _, ok := reg.Lookup(name); !ok {
			return nil, fmt.Errorf("Upstreams: %q is not one of the gateway's providers (%s)", name, strings.Join(reg.Names(), ", "))
		}
	}
	for _, p := range all {
		u := &upstream{p: p, name: p.Name(), up: p.Upstream()}
		o := u.up.Origin
		if s, ok := origins[u.name]; ok {
			o = s
		}
		var err error
		if u.origin, err = ParseOrigin(o); err != nil {
			return nil, fmt.Errorf("Upstreams[%q]: %w", u.name, err)
		}
		for i, h := range u.up.CredentialHeaders {
			u.up.CredentialHeaders[i] = http.CanonicalHeaderKey(h)
		}
		m.byName[u.name] = u
		if u.up.AtRoot {
			m.root = append(m.root, u)
		}
		for _, h := range u.up.CredentialHeaders {
			if !slices.Contains(m.credentialHeaders, h) {
				m.credentialHeaders = append(m.credentialHeaders, h)
			}
		}
		if q := u.up.CredentialQuery; q != "" && !slices.Contains(m.credentialQueries, q) {
			m.credentialQueries = append(m.credentialQueries, q)
		}
	}
	m.paramPattern = paramPattern(m.credentialQueries)
	for _, u := range m.byName {
		u.credentials = ownFirst(u.up.CredentialHeaders, m.credentialHeaders)
		var own []string
		if u.up.CredentialQuery != "" {
			own = []string{u.up.CredentialQuery}
		}
		u.queries = ownFirst(own, m.credentialQueries)
	}
	return m, nil
}

// ownFirst is own followed by the rest of all.
func ownFirst(own, all []string) []string {
	out := slices.Clone(own)
	for _, s := range all {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// target is where a request goes: its provider, its path and raw path
// relative to the provider's mount (the /NAME prefix stripped), and its
// route when it is accounted.
type target struct {
	u             *upstream
	path, rawPath string
	rt            provider.Route
	accounted     bool
}

// resolve finds the target of r. At the root, an accounted path of a
// provider served there comes first, so that the built-ins' paths keep
// their meaning; then a mount (/NAME/...), whose provider's Match decides
// what is accounted; then the root's passthrough, to the first provider
// whose Passthrough recognises the request. ok is false when no provider
// takes the request: it is refused rather than sent, with the client's
// credential, to a provider that did not claim it.
func (m *mounts) resolve(r *http.Request) (t target, ok bool) {
	post := r.Method == http.MethodPost
	p := r.URL.Path
	if post {
		for _, u := range m.root {
			if rt, ok := u.p.Match(p); ok {
				return target{u: u, path: p, rawPath: r.URL.RawPath, rt: rt, accounted: true}, true
			}
		}
	}
	if name, rest, ok := cutMount(p); ok {
		if u := m.byName[name]; u != nil {
			t := target{u: u, path: rest}
			if r.URL.RawPath != "" {
				_, t.rawPath, _ = cutMount(r.URL.RawPath)
			}
			if post {
				t.rt, t.accounted = u.p.Match(rest)
			}
			return t, true
		}
	}
	for _, u := range m.root {
		if u.up.Passthrough != nil && u.up.Passthrough(r) {
			return target{u: u, path: p, rawPath: r.URL.RawPath}, true
		}
	}
	return target{}, false
}

// cutMount splits a path /NAME/rest (or /NAME) into NAME and /rest ("/"
// for none).
func cutMount(p string) (name, rest string, ok bool) {
	s, ok := strings.CutPrefix(p, "/")
	if !ok || s == "" {
		return "", "", false
	}
	name, rest, found := strings.Cut(s, "/")
	if !found {
		return name, "/", true
	}
	return name, "/" + rest, true
}
