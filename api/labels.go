package api

import (
	"fmt"
	"maps"
	"net/url"
	"sort"
	"strings"
	"unicode/utf8"
)

// Labels are a call's attribution: a small map of key to value such as
// team=search, user=u-42 (issue 20). They ride on every attempt event
// and reach the request record (those of the request's first accepted
// attempt), the rollups and the report.
type Labels map[string]string

// Limits of labels (wire contract v1, issue 20).
const (
	// MaxLabels is the most pairs one attempt may carry.
	MaxLabels = 16
	// MaxLabelKeyLength bounds a key, in bytes. A key is a lower-case
	// ASCII letter followed by lower-case letters, digits and '_': the
	// grammar of a Prometheus label name, so that an operator can name
	// it in --metric-labels.
	MaxLabelKeyLength = 32
	// MaxLabelValueLength bounds a value, in bytes: 1 to 128 bytes of
	// UTF-8 without control characters.
	MaxLabelValueLength = 128
)

// LabelError says which label breaks which rule.
type LabelError struct {
	Key  string // the offending key ("" when the rule is about the count or the syntax)
	Rule string
}

func (e *LabelError) Error() string {
	if e.Key == "" {
		return "labels: " + e.Rule
	}
	return fmt.Sprintf("labels[%q]: %s", e.Key, e.Rule)
}

// Validate checks l against the contract's rules; the error is a
// *LabelError naming the key and the rule. Keys are checked in sorted
// order, so the error is the same whatever the map's order. A nil or
// empty l is valid (no labels).
func (l Labels) Validate() error {
	if len(l) > MaxLabels {
		return &LabelError{Rule: fmt.Sprintf("must hold at most %d pairs, got %d", MaxLabels, len(l))}
	}
	for _, k := range l.Keys() {
		if r := labelKeyRule(k); r != "" {
			return &LabelError{Key: k, Rule: r}
		}
		if r := labelValueRule(l[k]); r != "" {
			return &LabelError{Key: k, Rule: r}
		}
	}
	return nil
}

// Keys returns l's keys, sorted.
func (l Labels) Keys() []string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Merge returns l's pairs with over's on top (a key in both takes over's
// value), as a new map; nil when both are empty. Neither is modified.
// It does not validate: validate what it returns.
func (l Labels) Merge(over Labels) Labels {
	if len(l)+len(over) == 0 {
		return nil
	}
	out := make(Labels, len(l)+len(over))
	maps.Copy(out, l)
	maps.Copy(out, over)
	return out
}

func labelKeyRule(k string) string {
	if k == "" || len(k) > MaxLabelKeyLength {
		return fmt.Sprintf("key must be 1 to %d bytes, got %d", MaxLabelKeyLength, len(k))
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c >= 'a' && c <= 'z':
		case i > 0 && (c >= '0' && c <= '9' || c == '_'):
		default:
			return "key must be a lower-case letter followed by lower-case letters, digits and '_'"
		}
	}
	return ""
}

func labelValueRule(v string) string {
	if v == "" || len(v) > MaxLabelValueLength {
		return fmt.Sprintf("value must be 1 to %d bytes, got %d", MaxLabelValueLength, len(v))
	}
	if !utf8.ValidString(v) {
		return "value must be valid UTF-8"
	}
	for _, r := range v {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return "value must not hold control characters"
		}
	}
	return ""
}

// ParseLabels reads labels written as text, the form of the gateway's
// X-Ledger-Labels header and of the --labels flags:
//
//	team=search, user=u-42, note=caf%C3%A9%2C%20bar
//
// Pairs are separated by commas; each is key=value, with spaces and tabs
// around pairs, keys and values ignored. A value is percent-encoded
// (RFC 3986 %XX, the bytes of its UTF-8) wherever it holds a byte that
// is not printable ASCII or one of ',', '=', '%' or a space at either
// end: FormatLabels writes it so. "" (or only spaces) is no labels. A key
// given twice, an empty pair, a pair without '=' or a bad %XX is refused;
// so is what breaks the rules of Validate, which ParseLabels applies. The
// error is a *LabelError naming the key (when there is one) and the rule.
func ParseLabels(s string) (Labels, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	pairs := strings.Split(s, ",")
	l := make(Labels, len(pairs))
	for i, pair := range pairs {
		pair = strings.Trim(pair, " \t")
		k, v, ok := strings.Cut(pair, "=")
		k, v = strings.Trim(k, " \t"), strings.Trim(v, " \t")
		switch {
		case pair == "":
			return nil, &LabelError{Rule: fmt.Sprintf("pair %d is empty; write key=value pairs separated by commas", i+1)}
		case !ok:
			return nil, &LabelError{Rule: fmt.Sprintf("pair %d (%.64q) has no '='; write key=value pairs separated by commas", i+1, pair)}
		}
		if r := labelKeyRule(k); r != "" {
			return nil, &LabelError{Key: k, Rule: r}
		}
		if _, dup := l[k]; dup {
			return nil, &LabelError{Key: k, Rule: "key is given twice"}
		}
		dv, err := url.PathUnescape(v)
		if err != nil {
			return nil, &LabelError{Key: k, Rule: fmt.Sprintf("value %.64q has a bad percent escape; write %%XX with two hex digits, and %%25 for '%%'", v)}
		}
		l[k] = dv
	}
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return l, nil
}

// FormatLabels writes l in the form ParseLabels reads, keys sorted:
// "team=search,user=u-42". Values are percent-encoded where they must be.
func FormatLabels(l Labels) string {
	var b strings.Builder
	for i, k := range l.Keys() {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte('=')
		v := l[k]
		for j := 0; j < len(v); j++ {
			c := v[j]
			if c <= ' ' && (j == 0 || j == len(v)-1) || c < ' ' || c >= 0x7f || c == ',' || c == '=' || c == '%' {
				fmt.Fprintf(&b, "%%%02X", c)
				continue
			}
			b.WriteByte(c)
		}
	}
	return b.String()
}
