package events

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/names"
)

// decodeCase is one body fed to Decode: a testdata example, edited by a
// mutation on its JSON or by a text edit, or a whole literal body.
type decodeCase struct {
	name   string
	base   string              // testdata example; successFile when empty
	mutate mutation            // JSON-level edit of base
	text   func(string) string // text-level edit of base, for what a map cannot express
	body   string              // the whole body; base, mutate and text are ignored
	reason Reason              // "" when the body must be accepted
	field  string              // the *FieldError's field, for ReasonInvalidField
	want   func(a *Attempt)    // edits the base's expected attempt, for accepted bodies
}

func (c decodeCase) input(t *testing.T) []byte {
	t.Helper()
	if c.body != "" {
		return []byte(c.body)
	}
	base := c.base
	if base == "" {
		base = successFile
	}
	if c.text != nil {
		return []byte(c.text(string(readTestdata(t, base))))
	}
	return mutated(t, base, c.mutate)
}

func (c decodeCase) expected(t *testing.T) Attempt {
	t.Helper()
	want := wantSuccess(t)
	if c.base == errorFile {
		want = wantError(t)
	}
	if c.want != nil {
		c.want(&want)
	}
	return want
}

func accept(name string, m mutation, want func(a *Attempt)) decodeCase {
	return decodeCase{name: name, mutate: m, want: want}
}

func acceptErr(name string, m mutation, want func(a *Attempt)) decodeCase {
	return decodeCase{name: name, base: errorFile, mutate: m, want: want}
}

func invalid(name string, m mutation, field string) decodeCase {
	return decodeCase{name: name, mutate: m, reason: ReasonInvalidField, field: field}
}

func invalidErr(name string, m mutation, field string) decodeCase {
	return decodeCase{name: name, base: errorFile, mutate: m, reason: ReasonInvalidField, field: field}
}

func body(name, b string, reason Reason) decodeCase {
	return decodeCase{name: name, body: b, reason: reason}
}

func replace(old, new string) func(string) string {
	return func(s string) string {
		if !strings.Contains(s, old) {
			panic(fmt.Sprintf("testdata has no %q", old))
		}
		return strings.Replace(s, old, new, 1)
	}
}

func str(s string) string { return fmt.Sprintf("%q", s) }

// idCases checks one ID field against the rule, at both edges.
func idCases(field string) []decodeCase {
	id128 := strings.Repeat("aB3_-", 25) + "xyz"
	setID := func(id string) func(a *Attempt) {
		return func(a *Attempt) {
			if field == "request_id" {
				a.RequestID = id
			} else {
				a.SessionID = id
			}
		}
	}
	cs := []decodeCase{
		accept(field+" 128 characters", set(field, id128), setID(id128)),
		accept(field+" one character", set(field, "x"), setID("x")),
		accept(field+" all allowed classes", set(field, "AZaz09_-"), setID("AZaz09_-")),
		accept(field+" only dashes", set(field, "--"), setID("--")),
		invalid(field+" 129 characters", set(field, id128+"z"), field),
		invalid(field+" empty", set(field, ""), field),
		invalid(field+" missing", del(field), field),
		invalid(field+" null", set(field, nil), field),
		invalid(field+" number", set(field, raw("42")), field),
	}
	for _, bad := range []struct{ name, id string }{
		{"dot", "a.b"}, {"star", "a*"}, {"wildcard gt", "a>"}, {"space", "a b"},
		{"tab", "a\tb"}, {"slash", "a/b"}, {"unicode", "sessión"}, {"emoji", "run😀"},
		{"NUL", "a\x00b"}, {"colon", "a:b"}, {"only dot", "."},
	} {
		cs = append(cs, invalid(field+" with "+bad.name, set(field, bad.id), field))
	}
	return cs
}

func TestDecode(t *testing.T) {
	msg1024 := strings.Repeat("m", MaxMessageBytes)
	cases := []decodeCase{
		// The examples as they are.
		{name: "valid success example"},
		{name: "valid error example", base: errorFile},

		// attempt: an integer 0..1000; 3.0 and 3e0 are the integer 3.
		accept("attempt 0", set("attempt", 0), func(a *Attempt) { a.Attempt = 0 }),
		accept("attempt 1000", set("attempt", 1000), func(a *Attempt) { a.Attempt = 1000 }),
		accept("attempt 1.0", set("attempt", raw("1.0")), nil),
		accept("attempt 1e0", set("attempt", raw("1e0")), nil),
		accept("attempt 0.1e1", set("attempt", raw("0.1e1")), nil),
		accept("attempt 10E-1", set("attempt", raw("10E-1")), nil),
		accept("attempt 1e3", set("attempt", raw("1e3")), func(a *Attempt) { a.Attempt = 1000 }),
		accept("attempt 1000.000", set("attempt", raw("1000.000")), func(a *Attempt) { a.Attempt = 1000 }),
		accept("attempt -0", set("attempt", raw("-0")), func(a *Attempt) { a.Attempt = 0 }),
		accept("attempt 0.0e999999999999999999999", set("attempt", raw("0.0e999999999999999999999")), func(a *Attempt) { a.Attempt = 0 }),
		invalid("attempt -1", set("attempt", -1), "attempt"),
		invalid("attempt 1001", set("attempt", 1001), "attempt"),
		invalid("attempt 1.5", set("attempt", raw("1.5")), "attempt"),
		invalid("attempt 1.0000000000000001 (a fraction float64 rounds away)", set("attempt", raw("1.0000000000000001")), "attempt"),
		invalid("attempt 1e-400", set("attempt", raw("1e-400")), "attempt"),
		invalid("attempt -0.5", set("attempt", raw("-0.5")), "attempt"),
		invalid("attempt 1e309", set("attempt", raw("1e309")), "attempt"),
		invalid("attempt 1e99999999999999999999", set("attempt", raw("1e99999999999999999999")), "attempt"),
		invalid("attempt 99999999999999999999", set("attempt", raw("99999999999999999999")), "attempt"),
		invalid(`attempt "1"`, set("attempt", "1"), "attempt"),
		invalid(`attempt "x"`, set("attempt", "x"), "attempt"),
		invalid("attempt true", set("attempt", true), "attempt"),
		invalid("attempt object", set("attempt", map[string]any{}), "attempt"),
		invalid("attempt missing", del("attempt"), "attempt"),
		invalid("attempt null", set("attempt", nil), "attempt"),

		// usage: integers 0..1e12, missing fields are 0, the cache fields are
		// subsets of input_tokens.
		accept("input_tokens 1e12", set("usage.input_tokens", raw("1e12")), func(a *Attempt) { a.Usage.InputTokens = MaxTokens }),
		accept("input_tokens 1000000000000", set("usage.input_tokens", raw("1000000000000")), func(a *Attempt) { a.Usage.InputTokens = MaxTokens }),
		accept("output_tokens 1e12", set("usage.output_tokens", raw("1e12")), func(a *Attempt) { a.Usage.OutputTokens = MaxTokens }),
		accept("all tokens at the edge", all(
			set("usage.input_tokens", raw("1e12")), set("usage.output_tokens", raw("1e12")),
			set("usage.cache_read_input_tokens", raw("5e11")), set("usage.cache_creation_input_tokens", raw("500000000000.0")),
		), func(a *Attempt) {
			a.Usage = Usage{InputTokens: MaxTokens, OutputTokens: MaxTokens, CacheReadInputTokens: MaxTokens / 2, CacheCreationInputTokens: MaxTokens / 2}
		}),
		accept("tokens 512.0", set("usage.output_tokens", raw("512.0")), nil),
		accept("usage missing is zeros", del("usage"), func(a *Attempt) { a.Usage = Usage{} }),
		accept("usage null is zeros", set("usage", nil), func(a *Attempt) { a.Usage = Usage{} }),
		accept("usage empty object is zeros", set("usage", map[string]any{}), func(a *Attempt) { a.Usage = Usage{} }),
		accept("output_tokens missing is 0", del("usage.output_tokens"), func(a *Attempt) { a.Usage.OutputTokens = 0 }),
		accept("output_tokens null is 0", set("usage.output_tokens", nil), func(a *Attempt) { a.Usage.OutputTokens = 0 }),
		accept("cache_read_input_tokens missing is 0", del("usage.cache_read_input_tokens"), func(a *Attempt) { a.Usage.CacheReadInputTokens = 0 }),
		accept("cache_creation_input_tokens missing is 0", del("usage.cache_creation_input_tokens"), func(a *Attempt) { a.Usage.CacheCreationInputTokens = 0 }),
		accept("input_tokens missing is 0 when no cache tokens", all(del("usage.input_tokens"), del("usage.cache_read_input_tokens")),
			func(a *Attempt) { a.Usage.InputTokens, a.Usage.CacheReadInputTokens = 0, 0 }),
		accept("cache tokens equal to input", set("usage.cache_creation_input_tokens", 120), func(a *Attempt) { a.Usage.CacheCreationInputTokens = 120 }),
		invalid("input_tokens 1e12+1", set("usage.input_tokens", raw("1000000000001")), "usage.input_tokens"),
		invalid("input_tokens 1.000000000001e12", set("usage.input_tokens", raw("1.000000000001e12")), "usage.input_tokens"),
		invalid("output_tokens 1e12+1", set("usage.output_tokens", raw("1000000000001")), "usage.output_tokens"),
		invalid("cache_read 1e12+1", set("usage.cache_read_input_tokens", raw("1000000000001")), "usage.cache_read_input_tokens"),
		invalid("cache_creation 1e12+1", set("usage.cache_creation_input_tokens", raw("1000000000001")), "usage.cache_creation_input_tokens"),
		invalid("input_tokens beyond int64", set("usage.input_tokens", raw("1e19")), "usage.input_tokens"),
		invalid("input_tokens -1", set("usage.input_tokens", -1), "usage.input_tokens"),
		invalid("output_tokens -1", set("usage.output_tokens", -1), "usage.output_tokens"),
		invalid("cache_read -1", set("usage.cache_read_input_tokens", -1), "usage.cache_read_input_tokens"),
		invalid("cache_creation -1", set("usage.cache_creation_input_tokens", -1), "usage.cache_creation_input_tokens"),
		invalid("output_tokens 10.5", set("usage.output_tokens", raw("10.5")), "usage.output_tokens"),
		invalid("output_tokens 1000000000000.0000001", set("usage.output_tokens", raw("1000000000000.0000001")), "usage.output_tokens"),
		invalid(`output_tokens "10"`, set("usage.output_tokens", "10"), "usage.output_tokens"),
		invalid("output_tokens true", set("usage.output_tokens", true), "usage.output_tokens"),
		invalid("usage array", set("usage", raw("[1,2]")), "usage"),
		invalid("usage number", set("usage", 5), "usage"),
		invalid("usage string", set("usage", "2154"), "usage"),
		invalid("cache tokens exceed input by one", set("usage.cache_creation_input_tokens", 121), "usage.input_tokens"),
		invalid("input_tokens missing but cache tokens present", del("usage.input_tokens"), "usage.input_tokens"),

		// outcome and final.
		invalid(`outcome "ok"`, set("outcome", "ok"), "outcome"),
		invalid(`outcome "Success"`, set("outcome", "Success"), "outcome"),
		invalid(`outcome ""`, set("outcome", ""), "outcome"),
		invalid("outcome number", set("outcome", 1), "outcome"),
		invalid("success with final false", set("final", false), "final"),
		invalid(`final "true"`, set("final", "true"), "final"),
		invalid("final 1", set("final", 1), "final"),
		acceptErr("error with final true (retries exhausted)", set("final", true), func(a *Attempt) { a.Final = true }),

		// error: present if and only if outcome is "error".
		invalid("error on success", set("error", map[string]any{"kind": "server", "status": 500, "retryable": true, "message": "x"}), "error"),
		invalid("empty error object on success", set("error", map[string]any{}), "error"),
		invalid("error string on success", set("error", "boom"), "error"),
		accept("error null on success", set("error", nil), nil),
		invalidErr("error missing on error", del("error"), "error"),
		invalidErr("error null on error", set("error", nil), "error"),
		invalidErr("error string", set("error", "boom"), "error"),
		invalidErr("error array", set("error", raw(`[{"kind":"server"}]`)), "error"),
		invalidErr("error.kind unknown", set("error.kind", "teapot"), "error.kind"),
		invalidErr("error.kind upper case", set("error.kind", "RATE_LIMIT"), "error.kind"),
		invalidErr("error.kind empty", set("error.kind", ""), "error.kind"),
		invalidErr("error.kind missing", del("error.kind"), "error.kind"),
		invalidErr("error.kind number", set("error.kind", 5), "error.kind"),
		acceptErr("error.status 100", set("error.status", 100), func(a *Attempt) { a.Error.Status = 100 }),
		acceptErr("error.status 599", set("error.status", 599), func(a *Attempt) { a.Error.Status = 599 }),
		acceptErr("error.status 429.0", set("error.status", raw("429.0")), func(a *Attempt) { a.Error.Status = 429 }),
		acceptErr("error.status missing is 0", del("error.status"), nil),
		acceptErr("error.status null is 0", set("error.status", nil), nil),
		invalidErr("error.status 42", set("error.status", 42), "error.status"),
		invalidErr("error.status 99", set("error.status", 99), "error.status"),
		invalidErr("error.status 600", set("error.status", 600), "error.status"),
		invalidErr("error.status 1000", set("error.status", 1000), "error.status"),
		invalidErr("error.status -1", set("error.status", -1), "error.status"),
		invalidErr("error.status 429.5", set("error.status", raw("429.5")), "error.status"),
		invalidErr(`error.status "429"`, set("error.status", "429"), "error.status"),
		invalidErr("error.retryable missing", del("error.retryable"), "error.retryable"),
		invalidErr(`error.retryable "yes"`, set("error.retryable", "yes"), "error.retryable"),
		acceptErr("error.message 1024 bytes", set("error.message", msg1024), func(a *Attempt) { a.Error.Message = msg1024 }),
		acceptErr("error.message 1024 bytes of two-byte runes", set("error.message", strings.Repeat("é", 512)),
			func(a *Attempt) { a.Error.Message = strings.Repeat("é", 512) }),
		acceptErr("error.message missing is empty", del("error.message"), func(a *Attempt) { a.Error.Message = "" }),
		acceptErr("error.message unicode", set("error.message", "überlastet: 服务器过载 🔥"), func(a *Attempt) { a.Error.Message = "überlastet: 服务器过载 🔥" }),
		invalidErr("error.message 1025 bytes", set("error.message", msg1024+"m"), "error.message"),
		invalidErr("error.message 1025 bytes of runes", set("error.message", strings.Repeat("é", 512)+"m"), "error.message"),
		invalidErr("error.message invalid UTF-8 byte", set("error.message", raw("\"bad \xff byte\"")), "error.message"),
		invalidErr("error.message lone surrogate", set("error.message", raw(`"half \udc00 pair"`)), "error.message"),
		invalidErr("error.message high surrogate at end", set("error.message", raw(`"\ud83d"`)), "error.message"),
		invalidErr("error.message number", set("error.message", 7), "error.message"),

		// event_id: a canonical upper-case ULID.
		accept("event_id max ULID", set("event_id", "7ZZZZZZZZZZZZZZZZZZZZZZZZZ"), func(a *Attempt) { a.EventID = "7ZZZZZZZZZZZZZZZZZZZZZZZZZ" }),
		invalid("event_id lower-case ULID", set("event_id", "01jh8y5wdr3m4n5p6q7r8s9t0v"), "event_id"),
		invalid("event_id mixed-case ULID", set("event_id", "01JH8Y5WDR3M4N5P6Q7R8S9T0v"), "event_id"),
		invalid("event_id 25 characters", set("event_id", "01JH8Y5WDR3M4N5P6Q7R8S9T0"), "event_id"),
		invalid("event_id 27 characters", set("event_id", "01JH8Y5WDR3M4N5P6Q7R8S9T0VV"), "event_id"),
		invalid("event_id with U (not Crockford)", set("event_id", "01JH8Y5WDR3M4N5P6Q7R8S9T0U"), "event_id"),
		invalid("event_id overflows 128 bits", set("event_id", "8ZZZZZZZZZZZZZZZZZZZZZZZZZ"), "event_id"),
		invalid("event_id UUID", set("event_id", "0195a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"), "event_id"),
		invalid("event_id not a ULID", set("event_id", "not-a-ulid"), "event_id"),
		invalid("event_id empty", set("event_id", ""), "event_id"),
		invalid("event_id number", set("event_id", 1), "event_id"),

		// provider, model, provider_request_id: bounded valid UTF-8.
		accept("provider openai", set("provider", "openai"), func(a *Attempt) { a.Provider = "openai" }),
		accept("provider other", set("provider", "my-gateway"), func(a *Attempt) { a.Provider = "my-gateway" }),
		accept("provider 64 bytes", set("provider", strings.Repeat("p", 64)), func(a *Attempt) { a.Provider = strings.Repeat("p", 64) }),
		invalid("provider 65 bytes", set("provider", strings.Repeat("p", 65)), "provider"),
		invalid("provider empty", set("provider", ""), "provider"),
		invalid("provider invalid UTF-8", set("provider", raw("\"open\xc3ai\"")), "provider"),
		invalid("provider number", set("provider", 1), "provider"),
		accept("model 256 bytes", set("model", strings.Repeat("m", 256)), func(a *Attempt) { a.Model = strings.Repeat("m", 256) }),
		accept("model unicode", set("model", "模型-β"), func(a *Attempt) { a.Model = "模型-β" }),
		accept("model escaped surrogate pair", set("model", raw(`"m\ud83d\ude00"`)), func(a *Attempt) { a.Model = "m😀" }),
		accept("model escaped backslash before u", set("model", raw(`"a\\udc00"`)), func(a *Attempt) { a.Model = `a\udc00` }),
		invalid("model 257 bytes", set("model", strings.Repeat("m", 257)), "model"),
		invalid("model empty", set("model", ""), "model"),
		invalid("model lone low surrogate", set("model", raw(`"m\udc00"`)), "model"),
		invalid("model reversed surrogate pair", set("model", raw(`"\ude00\ud83d"`)), "model"),
		accept("provider_request_id 256 bytes", set("provider_request_id", strings.Repeat("r", 256)),
			func(a *Attempt) { a.ProviderRequestID = strings.Repeat("r", 256) }),
		accept("provider_request_id missing", del("provider_request_id"), func(a *Attempt) { a.ProviderRequestID = "" }),
		accept("provider_request_id null", set("provider_request_id", nil), func(a *Attempt) { a.ProviderRequestID = "" }),
		accept("provider_request_id empty", set("provider_request_id", ""), func(a *Attempt) { a.ProviderRequestID = "" }),
		invalid("provider_request_id 257 bytes", set("provider_request_id", strings.Repeat("r", 257)), "provider_request_id"),
		invalid("provider_request_id invalid UTF-8", set("provider_request_id", raw("\"\xff\"")), "provider_request_id"),
		invalid("provider_request_id number", set("provider_request_id", 12), "provider_request_id"),

		// started_at, finished_at: RFC 3339, normalised to UTC.
		accept("offset times normalised to UTC", all(
			set("started_at", "2026-03-14T11:27:06.271828182+02:00"), set("finished_at", "2026-03-14T02:27:14.000000001-07:00"),
		), nil),
		accept("times without fraction", all(set("started_at", "2026-03-14T09:27:06Z"), set("finished_at", "2026-03-14T09:27:14Z")),
			func(a *Attempt) {
				a.StartedAt = time.Date(2026, 3, 14, 9, 27, 6, 0, time.UTC)
				a.FinishedAt = time.Date(2026, 3, 14, 9, 27, 14, 0, time.UTC)
			}),
		accept("finished equal to started", set("finished_at", "2026-03-14T09:27:06.271828182Z"),
			func(a *Attempt) { a.FinishedAt = a.StartedAt }),
		accept("year 9999 in UTC", all(set("started_at", "9999-12-31T23:00:00Z"), set("finished_at", "9999-12-31T23:59:59.999999999Z")),
			func(a *Attempt) {
				a.StartedAt = time.Date(9999, 12, 31, 23, 0, 0, 0, time.UTC)
				a.FinishedAt = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
			}),
		invalid("finished before started", set("finished_at", "2026-03-14T09:27:06.271828181Z"), "finished_at"),
		invalid("finished before started once normalised", set("finished_at", "2026-03-14T10:27:06+02:00"), "finished_at"),
		invalid("started_at not RFC 3339", set("started_at", "2026-03-14 09:27:06"), "started_at"),
		invalid("started_at no zone", set("started_at", "2026-03-14T09:27:06"), "started_at"),
		invalid("started_at words", set("started_at", "yesterday"), "started_at"),
		invalid("started_at unix number", set("started_at", 1773480426), "started_at"),
		invalid("started_at beyond year 9999 in UTC", all(
			set("started_at", "9999-12-31T23:30:00-01:00"), set("finished_at", "9999-12-31T23:30:00-01:00"),
		), "started_at"),
		invalid("finished_at beyond year 9999 in UTC", set("finished_at", "9999-12-31T23:30:00-01:00"), "finished_at"),
		invalid("started_at before year 0 in UTC", set("started_at", "0000-01-01T00:30:00+01:00"), "started_at"),
		invalid("finished_at garbage", set("finished_at", "2026-13-01T00:00:00Z"), "finished_at"),

		// Unknown members are ignored, and names are case-sensitive.
		accept("unknown top-level member", set("trace_id", "4bf92f3577b34da6"), nil),
		accept("unknown nested members", all(
			set("usage.thinking_tokens", 99), set("usage.cache", map[string]any{"ttl": "5m"}),
		), nil),

		// The usage subsets, the service tier and the estimated input
		// (issue 19): optional, 0 or "" when missing, so that events
		// written before them stay valid.
		accept("usage.reasoning_tokens within output", set("usage.reasoning_tokens", 99), func(a *Attempt) { a.Usage.ReasoningTokens = 99 }),
		accept("usage.reasoning_tokens equal to output", set("usage.reasoning_tokens", 512), func(a *Attempt) { a.Usage.ReasoningTokens = 512 }),
		accept("usage.reasoning_tokens null is 0", set("usage.reasoning_tokens", nil), nil),
		invalid("usage.reasoning_tokens above output", set("usage.reasoning_tokens", 513), "usage.reasoning_tokens"),
		invalid("usage.reasoning_tokens negative", set("usage.reasoning_tokens", -1), "usage.reasoning_tokens"),
		invalid("usage.reasoning_tokens fraction", set("usage.reasoning_tokens", raw("1.5")), "usage.reasoning_tokens"),
		invalid(`usage.reasoning_tokens "9"`, set("usage.reasoning_tokens", "9"), "usage.reasoning_tokens"),
		accept("usage.cache_creation_1h_input_tokens within cache creation", all(
			set("usage.cache_creation_input_tokens", 100), set("usage.cache_read_input_tokens", 2000),
			set("usage.cache_creation_1h_input_tokens", 60),
		), func(a *Attempt) {
			a.Usage.CacheCreationInputTokens, a.Usage.CacheReadInputTokens, a.Usage.CacheCreation1hInputTokens = 100, 2000, 60
		}),
		invalid("usage.cache_creation_1h_input_tokens above cache creation", set("usage.cache_creation_1h_input_tokens", 1),
			"usage.cache_creation_1h_input_tokens"),
		invalid("usage.cache_creation_1h_input_tokens beyond 10^12", set("usage.cache_creation_1h_input_tokens", raw("1000000000001")),
			"usage.cache_creation_1h_input_tokens"),
		accept("service_tier priority", set("service_tier", "priority"), func(a *Attempt) { a.ServiceTier = "priority" }),
		accept("service_tier 32 bytes", set("service_tier", strings.Repeat("f", 32)), func(a *Attempt) { a.ServiceTier = strings.Repeat("f", 32) }),
		accept("service_tier empty is unknown", set("service_tier", ""), nil),
		accept("service_tier null is unknown", set("service_tier", nil), nil),
		invalid("service_tier 33 bytes", set("service_tier", strings.Repeat("f", 33)), "service_tier"),
		invalid("service_tier upper case", set("service_tier", "Priority"), "service_tier"),
		invalid("service_tier space", set("service_tier", "on demand"), "service_tier"),
		invalid("service_tier number", set("service_tier", 1), "service_tier"),
		accept("estimated_input_tokens", set("estimated_input_tokens", 4096), func(a *Attempt) { a.EstimatedInputTokens = 4096 }),
		accept("estimated_input_tokens null is 0", set("estimated_input_tokens", nil), nil),
		invalid("estimated_input_tokens negative", set("estimated_input_tokens", -1), "estimated_input_tokens"),
		invalid("estimated_input_tokens beyond 10^12", set("estimated_input_tokens", raw("1000000000001")), "estimated_input_tokens"),
		invalid("estimated_input_tokens fraction", set("estimated_input_tokens", raw("2.5")), "estimated_input_tokens"),
		acceptErr("unknown error member", set("error.provider_code", "overloaded_error"), nil),
		accept("differently cased names are unknown members", all(
			set("Event_ID", "garbage"), set("ATTEMPT", 999999), set("Schema", "ledger.attempt.v9"), set("Usage", "x"),
		), nil),
		invalid("event_id spelled Event_ID is missing", all(del("event_id"), set("Event_ID", "01JH8Y5WDR3M4N5P6Q7R8S9T0V")), "event_id"),
		invalid("usage.Input_Tokens is unknown", all(
			del("usage.input_tokens"), set("usage.Input_Tokens", 2154),
		), "usage.input_tokens"),
		{name: "escaped member name is the same name", text: replace(`"event_id"`, `"event\u005fid"`)},
		{name: "repeated member: the last counts", text: replace(`"attempt": 1,`, `"attempt": 7, "attempt": 1,`)},
		{name: "repeated member: the last is checked", text: replace(`"attempt": 1,`, `"attempt": 1, "attempt": 1001,`),
			reason: ReasonInvalidField, field: "attempt"},

		// malformed_json: not JSON, or not a JSON object.
		body("JSON array", `[]`, ReasonMalformedJSON),
		body("JSON array of an event", `[{"schema":"ledger.attempt.v1"}]`, ReasonMalformedJSON),
		body("JSON number", `42`, ReasonMalformedJSON),
		body("JSON string", `"ledger.attempt.v1"`, ReasonMalformedJSON),
		body("JSON true", `true`, ReasonMalformedJSON),
		body("JSON null", `null`, ReasonMalformedJSON),
		body("garbage", `not json at all`, ReasonMalformedJSON),
		body("whitespace only", " \n\t ", ReasonMalformedJSON),
		body("trailing comma", `{"schema":"ledger.attempt.v1",}`, ReasonMalformedJSON),
		body("single quotes", `{'schema':'ledger.attempt.v1'}`, ReasonMalformedJSON),
		body("two objects", `{"schema":"ledger.attempt.v1"} {}`, ReasonMalformedJSON),
		body("NaN", `{"schema":"ledger.attempt.v1","attempt":NaN}`, ReasonMalformedJSON),
		{name: "NUL byte body", body: "\x00", reason: ReasonMalformedJSON},
		{name: "truncated", text: func(s string) string { return s[:len(s)/2] }, reason: ReasonMalformedJSON},
		{name: "trailing garbage", text: func(s string) string { return s + "}" }, reason: ReasonMalformedJSON},
		{name: "control character in string", text: replace(`claude-sonnet-4-5`, "claude\nsonnet"), reason: ReasonMalformedJSON},

		// unknown_schema: missing, not a string, or not known.
		{name: "schema missing", mutate: del("schema"), reason: ReasonUnknownSchema},
		{name: "schema null", mutate: set("schema", nil), reason: ReasonUnknownSchema},
		{name: "schema v2", mutate: set("schema", "ledger.attempt.v2"), reason: ReasonUnknownSchema},
		{name: "schema empty", mutate: set("schema", ""), reason: ReasonUnknownSchema},
		{name: "schema upper case", mutate: set("schema", "LEDGER.ATTEMPT.V1"), reason: ReasonUnknownSchema},
		{name: "schema trailing space", mutate: set("schema", "ledger.attempt.v1 "), reason: ReasonUnknownSchema},
		{name: "schema number", mutate: set("schema", 1), reason: ReasonUnknownSchema},
		{name: "schema object", mutate: set("schema", raw("{\n\"v\": 1\n}")), reason: ReasonUnknownSchema},
		{name: "schema invalid UTF-8", mutate: set("schema", raw("\"ledger.attempt.v1\xff\"")), reason: ReasonUnknownSchema},
		{name: "schema spelled Schema", mutate: all(del("schema"), set("Schema", SchemaV1)), reason: ReasonUnknownSchema},
		body("empty object", `{}`, ReasonUnknownSchema),

		// Every string the decoder keeps at once: an unknown outcome and an
		// unknown error kind beside all the others (this panicked, the
		// decoder keeping room for one string less).
		invalidErr("unknown outcome and unknown error kind", all(set("outcome", "x"), set("error.kind", "y"), set("service_tier", "flex")), "outcome"),
	}
	cases = append(cases, idCases("request_id")...)
	cases = append(cases, idCases("session_id")...)
	for _, k := range []ErrorKind{KindRateLimit, KindOverloaded, KindTimeout, KindConnection, KindServer,
		KindClient, KindAuth, KindQuota, KindCanceled, KindCircuitOpen, KindOther} {
		cases = append(cases, acceptErr("error.kind "+string(k), set("error.kind", string(k)), func(a *Attempt) { a.Error.Kind = k }))
	}
	// Every required member, missing and null, names itself.
	for _, c := range []struct{ base, field string }{
		{successFile, "event_id"}, {successFile, "request_id"}, {successFile, "session_id"},
		{successFile, "attempt"}, {successFile, "outcome"}, {successFile, "final"},
		{successFile, "provider"}, {successFile, "model"}, {successFile, "started_at"},
		{successFile, "finished_at"}, {errorFile, "error"}, {errorFile, "error.kind"},
		{errorFile, "error.retryable"},
	} {
		cases = append(cases,
			decodeCase{name: c.field + " missing (" + c.base + ")", base: c.base, mutate: del(c.field), reason: ReasonInvalidField, field: c.field},
			decodeCase{name: c.field + " null (" + c.base + ")", base: c.base, mutate: set(c.field, nil), reason: ReasonInvalidField, field: c.field},
		)
	}

	t.Run("empty body", func(t *testing.T) {
		for _, in := range [][]byte{nil, {}} {
			got, err := Decode(in)
			require.Nil(t, got)
			requireReject(t, err, ReasonMalformedJSON, "")
		}
	})

	seen := map[string]bool{}
	for _, c := range cases {
		require.False(t, seen[c.name], "duplicate case name %q", c.name)
		seen[c.name] = true
		t.Run(c.name, func(t *testing.T) {
			in := c.input(t)
			got, err := Decode(in)
			if c.reason != "" {
				require.Nil(t, got)
				requireReject(t, err, c.reason, c.field)
				return
			}
			require.NoError(t, err, "body: %s", in)
			assert.Equal(t, c.expected(t), *got)
			assert.Equal(t, time.UTC, got.StartedAt.Location())
			assert.Equal(t, time.UTC, got.FinishedAt.Location())
			require.NoError(t, got.Validate())
		})
	}
}

// TestDecodeAnthropicInput shows the Anthropic mapping the contract asks
// for: the provider's input_tokens excludes the cache tokens, so the event
// carries their sum, and the cache fields remain subsets.
func TestDecodeAnthropicInput(t *testing.T) {
	const anthropicInput, cacheRead, cacheCreation = 120, 2034, 0
	a, err := Decode(readTestdata(t, successFile))
	require.NoError(t, err)
	assert.Equal(t, int64(anthropicInput+cacheRead+cacheCreation), a.Usage.InputTokens)
	assert.Equal(t, int64(cacheRead), a.Usage.CacheReadInputTokens)
}

func TestDecodeDetailIsReadable(t *testing.T) {
	tests := []struct {
		name   string
		body   []byte
		detail string
	}{
		{"not an object", []byte(`[1]`), "the body must be a JSON object, got a JSON array"},
		{"null", []byte(`null`), "the body must be a JSON object, got JSON null"},
		{"no schema", []byte(`{}`), `the event has no schema field; expected "ledger.attempt.v1"`},
		{"schema not a string", []byte(`{"schema":{"a":1}}`), `schema must be a string such as "ledger.attempt.v1", got a JSON object`},
		{"unknown schema", []byte(`{"schema":"ledger.attempt.v7"}`), `schema "ledger.attempt.v7" is not known to this aggregator; it knows "ledger.attempt.v1"`},
		{"fraction", mutated(t, successFile, set("attempt", raw("1.5"))), "attempt: must be an integer from 0 to 1000; 1.5 is not a whole number"},
		{"string number", mutated(t, successFile, set("attempt", "1")),
			"attempt: must be an integer from 0 to 1000 written as a JSON number, got a JSON string"},
		{"bad id", mutated(t, successFile, set("session_id", "a.b")),
			`session_id: has "." at position 1; it must be 1 to 128 characters of A-Z, a-z, 0-9, '_' or '-'`},
		{"status", mutated(t, errorFile, set("error.status", 42)),
			"error.status: must be an HTTP status from 100 to 599, or 0 when there is none; got 42"},
		{"long echo is clipped", mutated(t, successFile, set("outcome", strings.Repeat("x", 200))),
			`outcome: must be "success" or "error", got "` + strings.Repeat("x", 64) + `…"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(tt.body)
			var re *RejectError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, tt.detail, re.Detail)
		})
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	zone := time.FixedZone("UTC+5:30", 5*3600+1800)
	withZone := wantSuccess(t)
	withZone.StartedAt = withZone.StartedAt.In(zone)
	withZone.FinishedAt = withZone.FinishedAt.In(zone)
	unicode := wantError(t)
	unicode.Model = "модель-😀"
	unicode.Error.Message = `quote " backslash \ <html> & ` + "\u2028"
	noSchema := wantSuccess(t)
	noSchema.Schema = ""
	tests := []struct {
		name string
		in   Attempt
	}{
		{"success", wantSuccess(t)},
		{"error", wantError(t)},
		{"times in another zone", withZone},
		{"unicode and escapes", unicode},
		{"no schema is written as v1", noSchema},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := Marshal(&tt.in)
			require.NoError(t, err)
			got, err := Decode(data)
			require.NoError(t, err, "body: %s", data)

			want := tt.in
			want.Schema = SchemaV1
			want.StartedAt = want.StartedAt.UTC()
			want.FinishedAt = want.FinishedAt.UTC()
			assert.Equal(t, want, *got)

			again, err := Marshal(got)
			require.NoError(t, err)
			assert.Equal(t, string(data), string(again), "Marshal must be deterministic")
		})
	}

	t.Run("examples decode, encode and decode again", func(t *testing.T) {
		for _, name := range []string{successFile, errorFile} {
			a, err := Decode(readTestdata(t, name))
			require.NoError(t, err)
			data, err := Marshal(a)
			require.NoError(t, err)
			b, err := Decode(data)
			require.NoError(t, err)
			assert.Equal(t, a, b, name)
		}
	})
}

func TestMarshalLayout(t *testing.T) {
	a := wantSuccess(t)
	a.ProviderRequestID = ""
	a.StartedAt = time.Date(2026, 3, 14, 11, 27, 6, 5, time.FixedZone("", 2*3600))
	data, err := Marshal(&a)
	require.NoError(t, err)
	s := string(data)
	assert.Contains(t, s, `"schema":"ledger.attempt.v1"`)
	assert.Contains(t, s, `"started_at":"2026-03-14T09:27:06.000000005Z"`, "UTC with nanoseconds")
	assert.Contains(t, s, `"usage":{"input_tokens":2154,"output_tokens":512,"cache_read_input_tokens":2034,"cache_creation_input_tokens":0}`)
	assert.NotContains(t, s, `"error"`, "no error object on a success")
	assert.NotContains(t, s, `"provider_request_id"`, "an empty provider_request_id is omitted")

	e := wantError(t)
	data, err = Marshal(&e)
	require.NoError(t, err)
	assert.Contains(t, string(data), `"error":{"kind":"connection","status":0,"retryable":true,"message":"stream interrupted after 87 output tokens: unexpected EOF"}`)

	assert.Equal(t, "2026-03-14T09:27:06.000000000Z", FormatTime(time.Date(2026, 3, 14, 10, 27, 6, 0, time.FixedZone("", 3600))))
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(a *Attempt)
		field string // "" when valid
	}{
		{"valid", func(*Attempt) {}, ""},
		{"schema empty", func(a *Attempt) { a.Schema = "" }, "schema"},
		{"schema unknown", func(a *Attempt) { a.Schema = "ledger.attempt.v0" }, "schema"},
		{"attempt -1", func(a *Attempt) { a.Attempt = -1 }, "attempt"},
		{"attempt 1001", func(a *Attempt) { a.Attempt = MaxAttempt + 1 }, "attempt"},
		{"negative tokens", func(a *Attempt) { a.Usage.OutputTokens = -1 }, "usage.output_tokens"},
		{"too many tokens", func(a *Attempt) { a.Usage.CacheReadInputTokens = MaxTokens + 1 }, "usage.cache_read_input_tokens"},
		{"cache exceeds input", func(a *Attempt) { a.Usage.InputTokens = 2033 }, "usage.input_tokens"},
		{"outcome empty", func(a *Attempt) { a.Outcome = "" }, "outcome"},
		{"error on success", func(a *Attempt) { a.Error = &AttemptError{Kind: KindServer} }, "error"},
		{"error missing", func(a *Attempt) { a.Outcome = OutcomeError }, "error"},
		{"kind invalid", func(a *Attempt) {
			a.Outcome, a.Error = OutcomeError, &AttemptError{Kind: "nope"}
		}, "error.kind"},
		{"message invalid UTF-8", func(a *Attempt) {
			a.Outcome, a.Error = OutcomeError, &AttemptError{Kind: KindOther, Message: "\xff"}
		}, "error.message"},
		{"provider invalid UTF-8", func(a *Attempt) { a.Provider = "\xc3" }, "provider"},
		{"model too long", func(a *Attempt) { a.Model = strings.Repeat("m", MaxModelLength+1) }, "model"},
		{"started_at zero", func(a *Attempt) { a.StartedAt = time.Time{} }, "started_at"},
		{"finished_at zero", func(a *Attempt) { a.FinishedAt = time.Time{} }, "finished_at"},
		{"finished_at year 10000", func(a *Attempt) { a.FinishedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, "finished_at"},
		{"provider_request_id too long", func(a *Attempt) { a.ProviderRequestID = strings.Repeat("r", MaxProviderReqID+1) }, "provider_request_id"},
		{"bad event_id", func(a *Attempt) { a.EventID = "x" }, "event_id"},
		{"bad request_id", func(a *Attempt) { a.RequestID = "a b" }, "request_id"},
		{"bad session_id", func(a *Attempt) { a.SessionID = "" }, "session_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := wantSuccess(t)
			tt.edit(&a)
			err := a.Validate()
			if tt.field == "" {
				require.NoError(t, err)
				return
			}
			var fe *FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tt.field, fe.Field, "error: %v", err)
			assert.ErrorIs(t, err, ErrInvalidField)
			assert.Equal(t, fe.Field+": "+fe.Rule, err.Error())
		})
	}
}

func TestCheckSubject(t *testing.T) {
	a := wantSuccess(t) // session agent-42_run-0007, request req_7f3a9c2e
	tests := []struct {
		name    string
		subject string
		ok      bool
	}{
		{"match", "ledger.attempts.agent-42_run-0007.req_7f3a9c2e", true},
		{"built by Subject", Subject(a.SessionID, a.RequestID), true},
		{"swapped IDs", "ledger.attempts.req_7f3a9c2e.agent-42_run-0007", false},
		{"other request", "ledger.attempts.agent-42_run-0007.req_7f3a9c2f", false},
		{"other session", "ledger.attempts.agent-43_run-0007.req_7f3a9c2e", false},
		{"extra token", "ledger.attempts.agent-42_run-0007.req_7f3a9c2e.x", false},
		{"missing request token", "ledger.attempts.agent-42_run-0007", false},
		{"empty session token", "ledger.attempts..req_7f3a9c2e", false},
		{"empty request token", "ledger.attempts.agent-42_run-0007.", false},
		{"wrong prefix", "ledger.attempt.agent-42_run-0007.req_7f3a9c2e", false},
		{"rejected prefix", "ledger.rejected.agent-42_run-0007.req_7f3a9c2e", false},
		{"case differs", "ledger.attempts.Agent-42_run-0007.req_7f3a9c2e", false},
		{"no prefix", "agent-42_run-0007.req_7f3a9c2e", false},
		{"empty", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckSubject(tt.subject, &a)
			if tt.ok {
				require.NoError(t, err)
				return
			}
			re := requireReject(t, err, ReasonSubjectMismatch, "")
			assert.Nil(t, re.Unwrap())
		})
	}
}

func TestValidateID(t *testing.T) {
	tests := []struct {
		id string
		ok bool
	}{
		{"a", true},
		{"Z", true},
		{"0", true},
		{"_", true},
		{"-", true},
		{"req_7f3a9c2e-ABC", true},
		{strings.Repeat("x", MaxIDLength), true},
		{"", false},
		{strings.Repeat("x", MaxIDLength+1), false},
		{"a.b", false},
		{"a*", false},
		{">", false},
		{"a b", false},
		{"a\tb", false},
		{"a\nb", false},
		{"é", false},
		{"\xff", false},
		{"a/b", false},
		{"a+b", false},
		{"a$b", false},
		{"\x00", false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", clip(tt.id)), func(t *testing.T) {
			err := ValidateID("some_id", tt.id)
			if tt.ok {
				require.NoError(t, err)
				return
			}
			var fe *FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, "some_id", fe.Field)
			assert.Contains(t, fe.Rule, IDRule)
			assert.True(t, errors.Is(err, ErrInvalidField))
			requireHeaderSafe(t, err.Error())
		})
	}
}

func TestSubjects(t *testing.T) {
	assert.Equal(t, "ledger.attempts.s-1.r_2", Subject("s-1", "r_2"))
	assert.True(t, strings.HasPrefix(Subject("s", "r"), strings.TrimSuffix(names.AttemptsSubjects, ">")))
	assert.Equal(t, "ledger.rejected.invalid_field.42", RejectedSubject(ReasonInvalidField, 42))
	assert.Equal(t, "ledger.rejected.malformed_json.18446744073709551615", RejectedSubject(ReasonMalformedJSON, ^uint64(0)))
	assert.True(t, strings.HasPrefix(RejectedSubject(ReasonSessionConflict, 1), strings.TrimSuffix(names.RejectedSubjects, ">")))

	parse := []struct {
		subject, session, request string
		ok                        bool
	}{
		{"ledger.attempts.s.r", "s", "r", true},
		{Subject("agent-42_run-0007", "req_7f3a9c2e"), "agent-42_run-0007", "req_7f3a9c2e", true},
		{"ledger.attempts.s.r.x", "", "", false},
		{"ledger.attempts.s", "", "", false},
		{"ledger.attempts.s.", "", "", false},
		{"ledger.attempts..r", "", "", false},
		{"ledger.attempts.", "", "", false},
		{"ledger.attempts", "", "", false},
		{"ledger.attempt.s.r", "", "", false},
		{"LEDGER.attempts.s.r", "", "", false},
		{"", "", "", false},
	}
	for _, p := range parse {
		session, request, ok := ParseSubject(p.subject)
		assert.Equal(t, p.ok, ok, p.subject)
		assert.Equal(t, p.session, session, p.subject)
		assert.Equal(t, p.request, request, p.subject)
	}
}

func TestErrorTypes(t *testing.T) {
	fe := &FieldError{Field: "attempt", Rule: "must be 0"}
	assert.Equal(t, "attempt: must be 0", fe.Error())
	assert.ErrorIs(t, fe, ErrInvalidField)
	re := reject(ReasonInvalidField, fe)
	assert.Equal(t, "invalid_field: attempt: must be 0", re.Error())
	assert.Same(t, fe, re.Unwrap())

	for k, valid := range map[ErrorKind]bool{KindRateLimit: true, KindOther: true, "": false, "Other": false, "unknown": false} {
		assert.Equal(t, valid, k.Valid(), k)
	}
	u := Usage{InputTokens: 1, OutputTokens: 2, CacheReadInputTokens: 3, CacheCreationInputTokens: 4}
	assert.Equal(t, Usage{InputTokens: 2, OutputTokens: 4, CacheReadInputTokens: 6, CacheCreationInputTokens: 8}, u.Add(u))
	assert.Equal(t, Usage{}, u.Sub(u))
	assert.True(t, u.Sub(u).IsZero())
	assert.False(t, u.IsZero())
}

func BenchmarkDecode(b *testing.B) {
	for _, name := range []string{successFile, errorFile} {
		data := readTestdata(b, name)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := Decode(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
