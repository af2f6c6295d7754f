package gateway

import (
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
)

// client is who sent a request: its key (nil when the gateway has none)
// and the account its calls' guards are kept under ("" for none).
type client struct {
	key     *Key
	account string
}

// errSessionForbidden is identify's error for a session the client's key
// does not allow.
var errSessionForbidden = errors.New("session not allowed")

// authenticate takes the client key out of r and, when the gateway has
// keys, checks it: a request without a known key is answered 401 (ok
// false). The key's credential for u, when it has one, replaces the
// client's credentials. The credential that goes upstream is added to
// sec, to be redacted.
func (g *Gateway) authenticate(w http.ResponseWriter, r *http.Request, u *upstream, sec *secrets) (client, bool) {
	m := g.mounts
	presented := takeKey(r, g.cfg.Keys != nil, m.credentialHeaders, m.credentialQueries)
	var cl client
	if g.cfg.Keys != nil {
		why := "no client key: send it as the provider's API key (" + KeyPrefix + "...) or in " + HeaderKey
		if presented != "" {
			if cl.key = g.cfg.Keys.lookup(presented); cl.key == nil {
				why = "the client key is not one of the gateway's keys"
			}
		}
		if cl.key == nil {
			g.logRefusal(r, "unauthenticated", why)
			writeGatewayError(w, u, "", http.StatusUnauthorized, "unauthenticated", why, 0)
			return cl, false
		}
		if cred := cl.key.Credentials[u.name]; cred != "" {
			m.setCredential(r, u, cred)
			*sec = sec.add(cred)
		}
	}
	cl.account = accountOf(cl.key, r, u)
	return cl, true
}

// logRefusal counts a refused request and logs it at WARN, at most once
// a second per reason, with the number refused since (the limits'
// Refusals, so that /metrics counts these reasons too). It never logs a
// header.
func (g *Gateway) logRefusal(r *http.Request, reason, why string) {
	g.refusals.Refuse(r.Context(), reason, "gateway: request refused",
		slog.String("detail", why), slog.String("remote", r.RemoteAddr),
		slog.String("method", r.Method), slog.String("path", r.URL.Path))
}

// takeKey removes the client key from r and returns it: HeaderKey, else
// the provider credential header (headers) or query parameter (queries:
// Gemini's key) that carries a value starting with KeyPrefix. HeaderKey
// never goes upstream; the others are removed only when keys is set
// (without keys, a credential is the client's to send).
func takeKey(r *http.Request, keys bool, headers, queries []string) string {
	key := strings.TrimSpace(r.Header.Get(HeaderKey))
	r.Header.Del(HeaderKey)
	if !keys {
		return key
	}
	for _, h := range headers {
		v := strings.TrimSpace(r.Header.Get(h))
		if tok, ok := cutBearer(v); ok {
			v = tok
		}
		if strings.HasPrefix(v, KeyPrefix) {
			r.Header.Del(h)
			if key == "" {
				key = v
			}
		}
	}
	if r.URL.RawQuery != "" && len(queries) > 0 {
		q := r.URL.Query()
		for _, name := range queries {
			if v := q.Get(name); strings.HasPrefix(v, KeyPrefix) {
				q.Del(name)
				r.URL.RawQuery = q.Encode()
				if key == "" {
					key = v
				}
			}
		}
	}
	return key
}

// cutBearer returns the token of an Authorization value "Bearer token".
func cutBearer(v string) (string, bool) {
	scheme, tok, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

// setCredential makes cred the only credential of r: every provider's
// credential headers and query parameters are removed, and cred is set
// where u's clients put it (its first credential header, as a bearer
// token when it says so; else its query parameter).
func (m *mounts) setCredential(r *http.Request, u *upstream, cred string) {
	for _, h := range m.credentialHeaders {
		r.Header.Del(h)
	}
	q, changed := url.Values{}, false
	if r.URL.RawQuery != "" {
		q = r.URL.Query()
		for _, name := range m.credentialQueries {
			changed = changed || q.Has(name)
			q.Del(name)
		}
	}
	switch {
	case len(u.up.CredentialHeaders) > 0 && u.up.BearerCredential:
		r.Header.Set(u.up.CredentialHeaders[0], "Bearer "+cred)
	case len(u.up.CredentialHeaders) > 0:
		r.Header.Set(u.up.CredentialHeaders[0], cred)
	case u.up.CredentialQuery != "":
		q.Set(u.up.CredentialQuery, cred)
		changed = true
	}
	if changed {
		r.URL.RawQuery = q.Encode()
	}
}

// accountOf is the account of a request's calls: its key's Account, else
// a digest of the credential that goes upstream, read where u's clients
// put it first ("cred-" and 16 characters of a SHA-256: the same
// credential gives the same account on every replica, and the credential
// cannot be read back from it), else "" (no credential: the upstream's
// guards, shared).
func accountOf(k *Key, r *http.Request, u *upstream) string {
	if k != nil && k.Account != "" {
		return k.Account
	}
	cred := ""
	for _, h := range u.credentials {
		if v := strings.TrimSpace(r.Header.Get(h)); v != "" {
			cred = v
			if tok, ok := cutBearer(v); ok {
				cred = tok
			}
			break
		}
	}
	if cred == "" && r.URL.RawQuery != "" && len(u.queries) > 0 {
		q := r.URL.Query()
		for _, name := range u.queries {
			if cred = q.Get(name); cred != "" {
				break
			}
		}
	}
	if cred == "" {
		return ""
	}
	sum := sha256.Sum256([]byte("ledger-account\x00" + cred))
	return "cred-" + base32.HexEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:10])
}

// maxAccounts bounds the accounts that get guards of their own (without
// keys, clients name them by their credentials): past it, the others
// share one.
const maxAccounts = 4096

// otherAccounts is the account of the credentials past maxAccounts.
const otherAccounts = "other-accounts"

// accountKey is the account a call's guards are kept under: a, while the
// set of accounts has room.
func (g *Gateway) accountKey(a string) string {
	if a == "" || g.accounts.add(a) {
		return a
	}
	return otherAccounts
}
