package pricing

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// entry returns a valid catalog file of one entry with the member name
// set to the raw JSON value (or removed when value is "").
func entry(t *testing.T, name, value string) string {
	t.Helper()
	m := map[string]json.RawMessage{
		"provider": json.RawMessage(`"anthropic"`), "model": json.RawMessage(`"claude-x"`),
		"effective_from": json.RawMessage(`"2026-01-01"`), "input": json.RawMessage(`"3"`),
		"output": json.RawMessage(`"15"`), "cache_read": json.RawMessage(`"0.30"`),
		"source": json.RawMessage(`"https://example.test"`), "read_on": json.RawMessage(`"2026-12-04"`),
	}
	if value == "" {
		delete(m, name)
	} else if name != "" {
		m[name] = json.RawMessage(value)
	}
	b, err := json.Marshal(map[string]any{"entries": []any{m}})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestParseErrors: every broken rule is an error that names the entry,
// the field and the rule.
func TestParseErrors(t *testing.T) {
	const id = "entries[0] (anthropic claude-x standard 2026-01-01): "
	dup := `{"entries":[
		{"provider":"anthropic","model":"m","effective_from":"2026-01-01","input":"1","output":"1","source":"s","read_on":"2026-12-04"},
		{"provider":"Anthropic","model":"M","effective_from":"2026-01-01","input":"2","output":"2","source":"s","read_on":"2026-12-04"}]}`
	for _, tc := range []struct {
		name, data, want string
	}{
		{"not JSON", `{"entries":[`, "not JSON"},
		{"not an object", `[1]`, "must be a JSON object"},
		{"entries missing", `{}`, "entries: must be an array of entries"},
		{"unknown file member", `{"entries":[],"version":1}`, "version: unknown member; the members are entries"},
		{"unknown entry member", entry(t, "inputs", `"3"`), id + `inputs: unknown member`},
		{"price as a number", entry(t, "input", `3`), id + `input: must be a decimal string of US dollars per million tokens (e.g. "3.00"), got 3`},
		{"negative price", entry(t, "output", `"-15"`), id + `output: "-15" is not a decimal`},
		{"exponent", entry(t, "output", `"1e3"`), id + `output: "1e3" is not a decimal`},
		{"ten decimals", entry(t, "cache_read", `"0.0000000001"`), id + `cache_read: "0.0000000001" has 10 decimals; a price has at most 9`},
		{"too large", entry(t, "input", `"1000000000"`), id + `input: "1000000000" is too large`},
		{"no digit before the point", entry(t, "input", `".5"`), id + `input: ".5" has no digit before the point`},
		{"missing input", entry(t, "input", ""), id + "input: missing"},
		{"missing output", entry(t, "output", ""), id + "output: missing"},
		{"missing source", entry(t, "source", ""), id + "source: missing; every price names where it was read"},
		{"blank source", entry(t, "source", `"  "`), id + "source: missing"},
		{"missing read_on", entry(t, "read_on", ""), id + "read_on: missing; want a date YYYY-MM-DD"},
		{"bad date", entry(t, "effective_from", `"2026-13-01"`), `effective_from: "2026-13-01" is not a date YYYY-MM-DD`},
		{"unknown tier", entry(t, "service_tier", `"turbo"`), `service_tier: "turbo" is not a service tier; want "" (standard), "batch", "flex" or "priority"`},
		{"missing provider", entry(t, "provider", ""), "provider: missing"},
		{"provider with a space", entry(t, "provider", `"open ai"`), `provider: "open ai" must be at most 64 bytes of a-z, 0-9`},
		{"missing model", entry(t, "model", ""), "model: missing"},
		{"duplicate", dup, `entries[1] (anthropic m standard 2026-01-01): effective_from: entries[0] has the same provider, model, service tier and date`},
		{"tiers out of order", entry(t, "tiers", `[{"above_input_tokens":200000,"input":"6","output":"22.5","cache_read":"0.6"},{"above_input_tokens":100000,"input":"9","output":"30","cache_read":"0.9"}]`),
			id + "tiers[1].above_input_tokens: 100000 is out of order; tiers ascend strictly (the one before is above 200000)"},
		{"tier threshold not positive", entry(t, "tiers", `[{"above_input_tokens":0,"input":"6","output":"22.5","cache_read":"0.6"}]`),
			id + "tiers[0].above_input_tokens: must be a positive integer of tokens, got 0"},
		{"tier without a rate its entry gives", entry(t, "tiers", `[{"above_input_tokens":200000,"input":"6","output":"22.5"}]`),
			id + "tiers[0].cache_read: missing; the entry gives cache_read, so each of its tiers must"},
		{"unknown tier member", entry(t, "tiers", `[{"above_input_tokens":200000,"input":"6","output":"22.5","cache_read":"0.6","cached":"1"}]`),
			id + "tiers[0].cached: unknown member"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.data))
			if err == nil {
				t.Fatalf("Parse accepted it: %d entries", c.Len())
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q\ndoes not contain %q", err, tc.want)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T is not a *ParseError", err)
			}
		})
	}
}

// TestParseReportsEveryError: one pass names every broken field, so a
// file is fixed in one go.
func TestParseReportsEveryError(t *testing.T) {
	_, err := Parse([]byte(`{"entries":[{"provider":"p","model":"m","effective_from":"x","input":"-1","output":"1.0000000001","read_on":"2026-12-04"}]}`))
	for _, want := range []string{"effective_from:", "input:", "output:", "source:"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
}

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Rate
	}{
		{"3", 3_000_000_000},
		{"3.00", 3_000_000_000},
		{"0.075", 75_000_000},
		{"0.000000001", 1},
		{"22.50", 22_500_000_000},
		{"007.5", 7_500_000_000},
		{"999999999.999999999", 999_999_999_999_999_999},
	} {
		got, err := ParseRate(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
		if back, err := ParseRate(got.String()); err != nil || back != got {
			t.Errorf("ParseRate(%q.String() = %q) = %d, %v", tc.in, got.String(), back, err)
		}
	}
	for _, bad := range []string{"", ".", "1.", "-1", "+1", "1e3", "1,5", " 1", "0x10", "1.2.3", "NaN"} {
		if r, err := ParseRate(bad); err == nil {
			t.Errorf("ParseRate(%q) = %d, want an error", bad, r)
		}
	}
}

func TestMoneyString(t *testing.T) {
	for _, tc := range []struct {
		m    Money
		want string
	}{
		{0, "0.00"}, {3_082_500, "0.0030825"}, {1_000_000_000, "1.00"}, {1, "0.000000001"},
		{-50_000_000, "-0.05"}, {-1 << 63, "-9223372036.854775808"},
	} {
		if got := tc.m.String(); got != tc.want {
			t.Errorf("Money(%d).String() = %q, want %q", tc.m, got, tc.want)
		}
	}
}

// TestDefaultCatalog: the shipped file parses, every entry is keyed by a
// family (a dated key would never match), names an https source, and
// its long-context tiers cost at least the base rates.
func TestDefaultCatalog(t *testing.T) {
	c := Default()
	if c.Len() == 0 {
		t.Fatal("the default catalog is empty")
	}
	for _, e := range c.Entries() {
		if f := Family(e.Provider, e.Model); f != e.Model {
			t.Errorf("%s: keyed by %q, whose family is %q", e.name(), e.Model, f)
		}
		if !strings.HasPrefix(e.Source, "https://") {
			t.Errorf("%s: source %q is not an https URL", e.name(), e.Source)
		}
		if e.ReadOn.IsZero() {
			t.Errorf("%s: no reading date", e.name())
		}
		for _, tier := range e.Tiers {
			b, l := e.Rates, tier.Rates
			if l.Input < b.Input || l.Output < b.Output || l.CacheRead < b.CacheRead || l.CacheWrite < b.CacheWrite || l.CacheWrite1h < b.CacheWrite1h || l.Reasoning < b.Reasoning {
				t.Errorf("%s: tier above %d is cheaper than the base", e.name(), tier.AboveInputTokens)
			}
		}
	}
	if Default() != c {
		t.Error("Default parses the file again on each call")
	}
}
