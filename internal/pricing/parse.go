package pricing

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ParseError is one broken rule of a catalog file: the entry (its index
// in "entries" and, once read, its provider, model, tier and date), the
// field (dotted, e.g. "tiers[0].cache_read") and the rule.
type ParseError struct {
	Index int    // index in "entries"; -1 for the file itself
	Entry string // "anthropic claude-sonnet-4-5 standard 2025-09-29", as far as it could be read
	Field string
	Rule  string
}

func (e *ParseError) Error() string {
	var b strings.Builder
	if e.Index >= 0 {
		fmt.Fprintf(&b, "entries[%d]", e.Index)
		if e.Entry != "" {
			fmt.Fprintf(&b, " (%s)", e.Entry)
		}
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Rule)
	return b.String()
}

// maxParseErrors bounds the errors Parse reports at once.
const maxParseErrors = 20

// The members of a catalog file.
var (
	fileFields  = []string{"entries"}
	rateFields  = []string{"input", "output", "cache_read", "cache_write", "cache_write_1h", "reasoning"}
	entryFields = append([]string{"provider", "model", "service_tier", "effective_from", "tiers", "source", "read_on", "note"}, rateFields...)
	tierFields  = append([]string{"above_input_tokens"}, rateFields...)
)

// Parse reads a catalog file: a JSON object {"entries": [...]}, each
// entry an object with
//
//	provider, model        non-empty strings (compared in lower case)
//	service_tier           optional: "" or "standard", "batch", "flex", "priority"
//	effective_from         "YYYY-MM-DD": the first day (UTC) of the price
//	input, output          decimal strings, US dollars per million tokens
//	cache_read             optional (default: input)
//	cache_write            optional: the 5-minute or only cache write (default: input)
//	cache_write_1h         optional (default: cache_write)
//	reasoning              optional: where priced apart (default: output)
//	tiers                  optional: [{"above_input_tokens": N, rates...}], ascending N;
//	                       a tier gives input, output and every rate its entry gives
//	source                 where the price was read (a URL)
//	read_on                "YYYY-MM-DD": when
//	note                   optional free text
//
// Unknown members, a price that is not a decimal string (or has more
// than 9 decimals), two entries with the same provider, model, tier and
// date, tiers out of order and a missing source are errors. Each error
// names the entry, the field and the rule; Parse reports up to 20 of
// them, joined.
func Parse(data []byte) (*Catalog, error) {
	var p parser
	entries := p.file(data)
	if len(p.errs) == 0 {
		p.duplicates(entries)
	}
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	return newCatalog(entries), nil
}

type parser struct{ errs []error }

func (p *parser) fail(index int, entry, field, rule string, args ...any) {
	if len(p.errs) == maxParseErrors {
		p.errs = append(p.errs, &ParseError{Index: -1, Rule: "too many errors; the first 20 are above"})
	}
	if len(p.errs) > maxParseErrors {
		return
	}
	p.errs = append(p.errs, &ParseError{Index: index, Entry: entry, Field: field, Rule: fmt.Sprintf(rule, args...)})
}

// object decodes one JSON object into its members and reports members
// not in known.
func (p *parser) object(raw []byte, known []string, index int, entry, prefix string) (map[string]json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		p.fail(index, entry, strings.TrimSuffix(prefix, "."), "must be a JSON object")
		return nil, false
	}
	p.unknown(m, known, index, entry, prefix)
	return m, true
}

// unknown reports the members of m not in known, in name order.
func (p *parser) unknown(m map[string]json.RawMessage, known []string, index int, entry, prefix string) {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if !slices.Contains(known, k) {
			p.fail(index, entry, prefix+k, "unknown member; the members are %s", strings.Join(known, ", "))
		}
	}
}

func (p *parser) file(data []byte) []Entry {
	data = bytes.TrimSpace(data)
	if !json.Valid(data) {
		var v any
		err := json.Unmarshal(data, &v)
		p.fail(-1, "", "", "not JSON: %v", err)
		return nil
	}
	top, ok := p.object(data, fileFields, -1, "", "")
	if !ok {
		return nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(top["entries"], &raws); err != nil || raws == nil {
		p.fail(-1, "", "entries", "must be an array of entries")
		return nil
	}
	entries := make([]Entry, 0, len(raws))
	for i, raw := range raws {
		if e, ok := p.entry(i, raw); ok {
			entries = append(entries, e)
		}
	}
	return entries
}

// text decodes an optional string member.
func (p *parser) text(m map[string]json.RawMessage, name string, index int, entry, prefix string) (string, bool) {
	raw, there := m[name]
	if !there || string(raw) == "null" {
		return "", false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		p.fail(index, entry, prefix+name, "must be a string, got %s", raw)
		return "", false
	}
	return s, true
}

func (p *parser) date(m map[string]json.RawMessage, name string, index int, entry string) time.Time {
	s, there := p.text(m, name, index, entry, "")
	if !there {
		p.fail(index, entry, name, "missing; want a date YYYY-MM-DD")
		return time.Time{}
	}
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		p.fail(index, entry, name, "%q is not a date YYYY-MM-DD", s)
	}
	return t
}

func (p *parser) entry(i int, raw []byte) (Entry, bool) {
	n := len(p.errs)
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		p.fail(i, "", "", "must be a JSON object")
		return Entry{}, false
	}
	var e Entry
	// Read the entry's identity first, so that later errors name it.
	provider, _ := p.text(m, "provider", i, "", "")
	model, _ := p.text(m, "model", i, "", "")
	tier, _ := p.text(m, "service_tier", i, "", "")
	from, _ := p.text(m, "effective_from", i, "", "")
	e.Provider, e.Model, e.ServiceTier = strings.ToLower(provider), strings.ToLower(model), normalTier(tier)
	name := strings.Join(slices.DeleteFunc([]string{e.Provider, e.Model, tierName(e.ServiceTier), from}, func(s string) bool { return s == "" }), " ")
	p.unknown(m, entryFields, i, name, "")

	switch {
	case e.Provider == "":
		p.fail(i, name, "provider", "missing; want the provider's name, e.g. \"anthropic\" or a preset's name")
	case len(e.Provider) > 64 || strings.ContainsFunc(e.Provider, badNameRune):
		p.fail(i, name, "provider", "%q must be at most 64 bytes of a-z, 0-9, '.', '_' or '-'", provider)
	}
	switch {
	case e.Model == "":
		p.fail(i, name, "model", "missing; want a model family (\"claude-sonnet-4-5\") or model ID")
	case len(e.Model) > 256 || strings.ContainsFunc(e.Model, badModelRune):
		p.fail(i, name, "model", "%q must be at most 256 bytes of printable characters without spaces", model)
	}
	switch e.ServiceTier {
	case TierStandard, TierBatch, TierFlex, TierPriority:
	default:
		p.fail(i, name, "service_tier", "%q is not a service tier; want \"\" (standard), \"batch\", \"flex\" or \"priority\"", tier)
	}
	e.EffectiveFrom = p.date(m, "effective_from", i, name)
	e.ReadOn = p.date(m, "read_on", i, name)
	e.Source, _ = p.text(m, "source", i, name, "")
	if strings.TrimSpace(e.Source) == "" {
		p.fail(i, name, "source", "missing; every price names where it was read (a URL)")
	}
	e.Note, _ = p.text(m, "note", i, name, "")

	var given []string
	e.Rates, given = p.rates(m, i, name, "")
	if raw, there := m["tiers"]; there && string(raw) != "null" {
		var traws []json.RawMessage
		if err := json.Unmarshal(raw, &traws); err != nil {
			p.fail(i, name, "tiers", "must be an array of tiers")
		}
		for j, traw := range traws {
			prefix := fmt.Sprintf("tiers[%d].", j)
			tm, ok := p.object(traw, tierFields, i, name, prefix)
			if !ok {
				continue
			}
			var t Tier
			t.AboveInputTokens = p.tokens(tm, "above_input_tokens", i, name, prefix)
			if n := len(e.Tiers); n > 0 && t.AboveInputTokens <= e.Tiers[n-1].AboveInputTokens {
				p.fail(i, name, prefix+"above_input_tokens", "%d is out of order; tiers ascend strictly (the one before is above %d)", t.AboveInputTokens, e.Tiers[n-1].AboveInputTokens)
			}
			var tgiven []string
			t.Rates, tgiven = p.rates(tm, i, name, prefix)
			for _, f := range given {
				if !slices.Contains(tgiven, f) {
					p.fail(i, name, prefix+f, "missing; the entry gives %s, so each of its tiers must (a long-context tier prices the whole request)", f)
				}
			}
			e.Tiers = append(e.Tiers, t)
		}
	}
	return e, len(p.errs) == n
}

func tierName(t string) string {
	if t == TierStandard {
		return "standard"
	}
	return t
}

func badNameRune(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
}

func badModelRune(r rune) bool { return r <= ' ' || r == 0x7f || r == 0xfffd }

func (p *parser) tokens(m map[string]json.RawMessage, name string, index int, entry, prefix string) int64 {
	raw, there := m[name]
	if !there {
		p.fail(index, entry, prefix+name, "missing; want the number of input tokens above which the tier applies")
		return 0
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n <= 0 {
		p.fail(index, entry, prefix+name, "must be a positive integer of tokens, got %s", raw)
	}
	return n
}

// rates reads the rate members of an entry or a tier and resolves the
// defaults; given lists the members present.
func (p *parser) rates(m map[string]json.RawMessage, index int, entry, prefix string) (Rates, []string) {
	var given []string
	rate := func(name string) (Rate, bool) {
		raw, there := m[name]
		if !there || string(raw) == "null" {
			return 0, false
		}
		given = append(given, name)
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			p.fail(index, entry, prefix+name, "must be a decimal string of US dollars per million tokens (e.g. \"3.00\"), got %s", raw)
			return 0, true
		}
		r, err := ParseRate(s)
		if err != nil {
			p.fail(index, entry, prefix+name, "%v", err)
		}
		return r, true
	}
	var r Rates
	var ok bool
	if r.Input, ok = rate("input"); !ok {
		p.fail(index, entry, prefix+"input", "missing; want the input price in US dollars per million tokens")
	}
	if r.Output, ok = rate("output"); !ok {
		p.fail(index, entry, prefix+"output", "missing; want the output price in US dollars per million tokens")
	}
	if r.CacheRead, ok = rate("cache_read"); !ok {
		r.CacheRead = r.Input
	}
	if r.CacheWrite, ok = rate("cache_write"); !ok {
		r.CacheWrite = r.Input
	}
	if r.CacheWrite1h, ok = rate("cache_write_1h"); !ok {
		r.CacheWrite1h = r.CacheWrite
	}
	if r.Reasoning, ok = rate("reasoning"); !ok {
		r.Reasoning = r.Output
	}
	return r, given
}

func (p *parser) duplicates(entries []Entry) {
	type dkey struct {
		key
		from time.Time
	}
	seen := make(map[dkey]int, len(entries))
	for i, e := range entries {
		k := dkey{key{e.Provider, e.Model, e.ServiceTier}, e.EffectiveFrom}
		if j, dup := seen[k]; dup {
			p.fail(i, e.name(), "effective_from", "entries[%d] has the same provider, model, service tier and date; a price change is a new date, never a second entry", j)
			continue
		}
		seen[k] = i
	}
}

// name identifies an entry in errors and listings.
func (e *Entry) name() string {
	return fmt.Sprintf("%s %s %s %s", e.Provider, e.Model, tierName(e.ServiceTier), e.EffectiveFrom.Format(time.DateOnly))
}

// digest is the Version of entries in canonical order: only what prices
// an attempt enters it.
func digest(entries []Entry) string {
	h := sha256.New()
	var b []byte
	for _, e := range entries {
		b = b[:0]
		b = fmt.Appendf(b, "%q %q %q %s %s", e.Provider, e.Model, e.ServiceTier, e.EffectiveFrom.Format(time.DateOnly), ratesKey(e.Rates))
		for _, t := range e.Tiers {
			b = fmt.Appendf(b, " >%d %s", t.AboveInputTokens, ratesKey(t.Rates))
		}
		b = append(b, '\n')
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func ratesKey(r Rates) string {
	return fmt.Sprintf("%d/%d/%d/%d/%d/%d", r.Input, r.Output, r.CacheRead, r.CacheWrite, r.CacheWrite1h, r.Reasoning)
}
