package gateway

import (
	"net/http"
	"strings"
)

// redacted replaces a credential wherever a message would show it.
const redacted = "[REDACTED]"

// credentialHeaders are the client's credential headers, passed upstream
// and never logged or published.
var credentialHeaders = []string{"Authorization", "X-Api-Key", "X-Goog-Api-Key", "Proxy-Authorization", HeaderKey}

// secrets are the credentials of one request: the values of its
// credential headers (and a bearer token alone), and its "key" query
// parameter (Gemini's other way of passing the API key), which a
// transport error's message would show in the URL.
type secrets []string

// secretsOf collects the credentials of r.
func secretsOf(r *http.Request) secrets {
	var s secrets
	for _, k := range credentialHeaders {
		for _, v := range r.Header.Values(k) {
			s = s.add(v)
			if _, tok, ok := strings.Cut(v, " "); ok {
				s = s.add(tok)
			}
		}
	}
	if r.URL.RawQuery != "" {
		for _, v := range r.URL.Query()["key"] {
			s = s.add(v)
		}
	}
	return s
}

// add adds v unless it is too short to be a credential (it would redact
// ordinary words).
func (s secrets) add(v string) secrets {
	if v = strings.TrimSpace(v); len(v) >= 8 {
		s = append(s, v)
	}
	return s
}

// redact replaces every credential in msg.
func (s secrets) redact(msg string) string {
	for _, v := range s {
		if strings.Contains(msg, v) {
			msg = strings.ReplaceAll(msg, v, redacted)
		}
	}
	return msg
}
