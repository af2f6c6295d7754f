package gateway

import (
	"cmp"
	"net/http"
	"net/url"
	"regexp"
	"slices"
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
	// Longest first: a bearer token inside its header's value is
	// replaced with the value.
	slices.SortFunc(s, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	return s
}

// add adds v, of any length, and the forms a URL would show it in.
func (s secrets) add(v string) secrets {
	if v = strings.TrimSpace(v); v == "" {
		return s
	}
	for _, f := range []string{v, url.QueryEscape(v), url.PathEscape(v)} {
		if !slices.Contains(s, f) {
			s = append(s, f)
		}
	}
	return s
}

// keyParam matches a "key" query parameter's name in a URL as a message
// may show it: after ? or &, in any case, percent-encoded (once or twice),
// JSON- or HTML-escaped; keyValue is the rest of its value.
var keyParam = regexp.MustCompile(`(?i)(?:[?&]|%3f|%26|%253f|%2526|\\u003f|\\u0026|&amp;)key(?:=|%3d|%253d|\\u003d)`)

// keyValueEnd are the characters that end a query parameter's value as a
// message shows it.
const keyValueEnd = "&#\"' \t\r\n<>,;)]}\\"

// redact replaces every credential in msg, and the value of every key
// query parameter, however encoded.
func (s secrets) redact(msg string) string {
	for _, v := range s {
		if strings.Contains(msg, v) {
			msg = strings.ReplaceAll(msg, v, redacted)
		}
	}
	return redactKeyParams(msg)
}

// redactKeyParams replaces the value of every key query parameter in msg.
func redactKeyParams(msg string) string {
	locs := keyParam.FindAllStringIndex(msg, -1)
	if locs == nil {
		return msg
	}
	var b strings.Builder
	last := 0
	for _, l := range locs {
		if l[0] < last {
			continue // inside the value just redacted
		}
		end := l[1] + valueLen(msg[l[1]:])
		b.WriteString(msg[last:l[1]])
		if end > l[1] && msg[l[1]:end] != redacted {
			b.WriteString(redacted)
		} else {
			b.WriteString(msg[l[1]:end])
		}
		last = end
	}
	b.WriteString(msg[last:])
	return b.String()
}

// valueLen is the length of the query parameter value v begins with: up
// to a character that ends it, or an encoded & (%26, %2526).
func valueLen(v string) int {
	n := len(v)
	if i := strings.IndexAny(v, keyValueEnd); i >= 0 {
		n = i
	}
	lower := strings.ToLower(v[:n])
	for _, amp := range []string{"%26", "%2526"} {
		if i := strings.Index(lower, amp); i >= 0 && i < n {
			n = i
		}
	}
	return n
}
