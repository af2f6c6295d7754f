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

// proxyHeaders are the credential headers of every request besides the
// providers' own: a proxy's, and the gateway's client key.
var proxyHeaders = []string{"Proxy-Authorization", HeaderKey}

// secrets are the credentials of one request: the values of its
// credential headers (and a bearer token alone), and its credential query
// parameters (Gemini's key), which a transport error's message would show
// in the URL.
type secrets struct {
	vals []string
	// params matches the name of a credential query parameter as a
	// message may show it; nil when no provider has one.
	params *regexp.Regexp
}

// secretsOf collects the credentials of r: the values of every
// provider's credential headers and query parameters (they are passed
// upstream, and never logged or published).
func (m *mounts) secretsOf(r *http.Request) secrets {
	s := secrets{params: m.paramPattern}
	for _, hs := range [][]string{m.credentialHeaders, proxyHeaders} {
		for _, k := range hs {
			for _, v := range r.Header.Values(k) {
				s = s.add(v)
				if _, tok, ok := strings.Cut(v, " "); ok {
					s = s.add(tok)
				}
			}
		}
	}
	if r.URL.RawQuery != "" && len(m.credentialQueries) > 0 {
		q := r.URL.Query()
		for _, k := range m.credentialQueries {
			for _, v := range q[k] {
				s = s.add(v)
			}
		}
	}
	// Longest first: a bearer token inside its header's value is
	// replaced with the value.
	slices.SortFunc(s.vals, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	return s
}

// add adds v, of any length, and the forms a URL would show it in.
func (s secrets) add(v string) secrets {
	if v = strings.TrimSpace(v); v == "" {
		return s
	}
	for _, f := range []string{v, url.QueryEscape(v), url.PathEscape(v)} {
		if !slices.Contains(s.vals, f) {
			s.vals = append(s.vals, f)
		}
	}
	return s
}

// paramPattern matches the name of one of the query parameters names in
// a URL as a message may show it: after ? or &, in any case,
// percent-encoded (once or twice), JSON- or HTML-escaped. Nil for no
// names.
func paramPattern(names []string) *regexp.Regexp {
	if len(names) == 0 {
		return nil
	}
	alts := make([]string, len(names))
	for i, n := range names {
		alts[i] = regexp.QuoteMeta(n)
	}
	return regexp.MustCompile(`(?i)(?:[?&]|%3f|%26|%253f|%2526|\\u003f|\\u0026|&amp;)(?:` + strings.Join(alts, "|") + `)(?:=|%3d|%253d|\\u003d)`)
}

// keyValueEnd are the characters that end a query parameter's value as a
// message shows it.
const keyValueEnd = "&#\"' \t\r\n<>,;)]}\\"

// redact replaces every credential in msg, and the value of every
// credential query parameter, however encoded.
func (s secrets) redact(msg string) string {
	for _, v := range s.vals {
		if strings.Contains(msg, v) {
			msg = strings.ReplaceAll(msg, v, redacted)
		}
	}
	return s.redactParams(msg)
}

// redactParams replaces the value of every credential query parameter in
// msg.
func (s secrets) redactParams(msg string) string {
	if s.params == nil {
		return msg
	}
	locs := s.params.FindAllStringIndex(msg, -1)
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
