package gateway

import (
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"log/slog"
	"net/http"
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
// false). The key's credential for provider, when it has one, replaces
// the client's credential headers. The credential that goes upstream is
// added to sec, to be redacted.
func (g *Gateway) authenticate(w http.ResponseWriter, r *http.Request, provider string, sec *secrets) (client, bool) {
	presented := takeKey(r, g.cfg.Keys != nil)
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
			writeGatewayError(w, provider, "", http.StatusUnauthorized, "unauthenticated", why, 0)
			return cl, false
		}
		if cred := cl.key.Credentials[provider]; cred != "" {
			setCredential(r, provider, cred)
			*sec = sec.add(cred)
		}
	}
	cl.account = accountOf(cl.key, r)
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
// the provider credential header (or Gemini's key parameter) that
// carries a value starting with KeyPrefix. HeaderKey never goes upstream;
// the others are removed only when keys is set (without keys, a
// credential is the client's to send).
func takeKey(r *http.Request, keys bool) string {
	key := strings.TrimSpace(r.Header.Get(HeaderKey))
	r.Header.Del(HeaderKey)
	if !keys {
		return key
	}
	for _, h := range []string{"Authorization", "X-Api-Key", "X-Goog-Api-Key"} {
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
	if r.URL.RawQuery != "" {
		q := r.URL.Query()
		if v := q.Get("key"); strings.HasPrefix(v, KeyPrefix) {
			q.Del("key")
			r.URL.RawQuery = q.Encode()
			if key == "" {
				key = v
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

// setCredential makes cred the only credential of r, in the header
// provider's clients use.
func setCredential(r *http.Request, provider, cred string) {
	for _, h := range []string{"Authorization", "X-Api-Key", "X-Goog-Api-Key"} {
		r.Header.Del(h)
	}
	if r.URL.RawQuery != "" {
		if q := r.URL.Query(); q.Has("key") {
			q.Del("key")
			r.URL.RawQuery = q.Encode()
		}
	}
	switch provider {
	case Anthropic:
		r.Header.Set("X-Api-Key", cred)
	case Gemini:
		r.Header.Set("X-Goog-Api-Key", cred)
	default:
		r.Header.Set("Authorization", "Bearer "+cred)
	}
}

// accountOf is the account of a request's calls: its key's Account, else
// a digest of the credential that goes upstream ("cred-" and 16
// characters of a SHA-256: the same credential gives the same account on
// every replica, and the credential cannot be read back from it), else ""
// (no credential: the upstream's guards, shared).
func accountOf(k *Key, r *http.Request) string {
	if k != nil && k.Account != "" {
		return k.Account
	}
	cred := ""
	for _, h := range []string{"X-Api-Key", "X-Goog-Api-Key", "Authorization"} {
		if v := strings.TrimSpace(r.Header.Get(h)); v != "" {
			cred = v
			if tok, ok := cutBearer(v); ok {
				cred = tok
			}
			break
		}
	}
	if cred == "" && r.URL.RawQuery != "" {
		cred = r.URL.Query().Get("key")
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
