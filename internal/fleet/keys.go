package fleet

import (
	"strings"
)

// encodeToken makes s one token of a KV key: letters, digits, '-', '_'
// and '/' stay; every other byte (the '.' that separates tokens, the '='
// that escapes, anything a NATS subject refuses) becomes =XX.
func encodeToken(s string) string {
	plain := true
	for i := 0; i < len(s); i++ {
		if !plainByte(s[i]) {
			plain = false
			break
		}
	}
	if plain && s != "" {
		return s
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if plainByte(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('=')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

func plainByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '/'
}

// decodeToken reverses encodeToken; ok is false for a token it could not
// have made.
func decodeToken(t string) (string, bool) {
	if !strings.Contains(t, "=") {
		return t, t != ""
	}
	var b strings.Builder
	for i := 0; i < len(t); i++ {
		c := t[i]
		if c != '=' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(t) {
			return "", false
		}
		hi, ok1 := unhex(t[i+1])
		lo, ok2 := unhex(t[i+2])
		if !ok1 || !ok2 {
			return "", false
		}
		b.WriteByte(hi<<4 | lo)
		i += 2
	}
	return b.String(), true
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// key is the KV key of a record of kind about name (an upstream or a
// process).
func key(kind, name string) string { return kind + "." + encodeToken(name) }

// parseKey splits a KV key into its kind and name.
func parseKey(k string) (kind, name string, ok bool) {
	kind, tok, found := strings.Cut(k, ".")
	if !found || strings.Contains(tok, ".") {
		return "", "", false
	}
	name, ok = decodeToken(tok)
	return kind, name, ok
}
