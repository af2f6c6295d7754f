package api

import (
	"fmt"
	"sort"
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
	Key  string // the offending key ("" when the rule is about the count)
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
// order, so the error is the same whatever the map's order.
func (l Labels) Validate() error {
	if len(l) > MaxLabels {
		return &LabelError{Rule: fmt.Sprintf("at most %d pairs, got %d", MaxLabels, len(l))}
	}
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if r := labelKeyRule(k); r != "" {
			return &LabelError{Key: k, Rule: r}
		}
		if r := labelValueRule(l[k]); r != "" {
			return &LabelError{Key: k, Rule: r}
		}
	}
	return nil
}

func labelKeyRule(k string) string {
	if k == "" || len(k) > MaxLabelKeyLength {
		return fmt.Sprintf("key must be 1 to %d bytes", MaxLabelKeyLength)
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
		return fmt.Sprintf("value must be 1 to %d bytes", MaxLabelValueLength)
	}
	if !utf8.ValidString(v) {
		return "value must be UTF-8"
	}
	for _, r := range v {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return "value must not hold control characters"
		}
	}
	return ""
}
