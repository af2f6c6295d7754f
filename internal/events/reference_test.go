package events

// This file keeps the decoder and encoder that shipped before the
// hand-written scanner of decode.go and the appender of encode.go, as they
// were, with their identifiers prefixed by ref. They are the specification
// that FuzzDecodeMatchesReference and FuzzMarshalMatchesReference hold the
// fast code to: for every input, the same *Attempt or the same reject
// (reason and detail), and the same bytes. Do not "fix" anything here; a
// behaviour change belongs in both places, deliberately.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"

	"github.com/agentledger/ledger/api"
)

// refDecode is Decode as it was: encoding/json into a map of raw members,
// then each member read in the contract's order. It shares the decoders
// table with Decode, so that RegisterDecoder affects both alike; the nil
// entry of SchemaV1 is the built-in v1, refDecodeV1 here.
func refDecode(data []byte) (*Attempt, error) {
	// Added with the contract's size limit, deliberately in both places.
	if len(data) > MaxEventBytes {
		return nil, rejectf(ReasonTooLarge, "the body is %d bytes; an event body is at most %d bytes (64 KiB)", len(data), MaxEventBytes)
	}
	obj, rerr := refParseBody(data)
	if rerr != nil {
		return nil, rerr
	}
	raw, ok := obj["schema"]
	if !ok || refKindOf(raw) == "null" {
		return nil, rejectf(ReasonUnknownSchema, "the event has no schema field; expected %q", SchemaV1)
	}
	schema, ok := refDecodeString(raw)
	if !ok {
		if refKindOf(raw) == "string" {
			return nil, rejectf(ReasonUnknownSchema, "schema must be valid UTF-8 such as %q", SchemaV1)
		}
		return nil, rejectf(ReasonUnknownSchema, "schema must be a string such as %q, got a JSON %s", SchemaV1, refKindOf(raw))
	}
	dec, ok := decoders[schema]
	if !ok {
		return nil, rejectf(ReasonUnknownSchema, "schema %q is not known to this aggregator; it knows %q", refClip(schema), SchemaV1)
	}
	if dec != nil {
		return dec(data) // a decoder added with RegisterDecoder
	}
	return refDecodeV1(data, obj)
}

// The comments below are those of the code as it shipped, under the
// names it had.

// object is a JSON object whose members are looked up by exact name.
type refObject map[string]json.RawMessage

// parseBody reads the event body, which must be a JSON object.
func refParseBody(data []byte) (refObject, *RejectError) {
	var obj refObject
	if err := json.Unmarshal(data, &obj); err != nil {
		return nil, refMalformed(err)
	}
	if obj == nil {
		return nil, rejectf(ReasonMalformedJSON, "the body must be a JSON object, got JSON null")
	}
	return obj, nil
}

func refMalformed(err error) *RejectError {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field == "" {
		return rejectf(ReasonMalformedJSON, "the body must be a JSON object, got a JSON %s", te.Value)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return rejectf(ReasonMalformedJSON, "the body is not valid JSON: %s at byte %d", se.Error(), se.Offset)
	}
	return rejectf(ReasonMalformedJSON, "the body is not valid JSON: %s", err.Error())
}

// kindOf names the JSON type of a syntactically valid value.
func refKindOf(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "null"
	}
	switch raw[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// members reads the members of one JSON object of an event; prefix is the
// dotted path of the object ("" for the body, "usage." for usage).
type refMembers struct {
	obj    refObject
	prefix string
}

// get returns the member's raw value; a null member counts as missing.
func (m refMembers) get(name string) (json.RawMessage, bool) {
	raw, ok := m.obj[name]
	if !ok || refKindOf(raw) == "null" {
		return nil, false
	}
	return raw, true
}

func (m refMembers) typeErr(name, want string, raw json.RawMessage) *FieldError {
	return fieldErr(m.prefix+name, "must be a JSON %s, got a JSON %s", want, refKindOf(raw))
}

// str reads a string member. A missing one is an error when required and
// "" otherwise.
func (m refMembers) str(name string, required bool) (string, *FieldError) {
	raw, ok := m.get(name)
	if !ok {
		if required {
			return "", fieldErr(m.prefix+name, "is missing")
		}
		return "", nil
	}
	if refKindOf(raw) != "string" {
		return "", m.typeErr(name, "string", raw)
	}
	s, ok := refDecodeString(raw)
	if !ok {
		return "", fieldErr(m.prefix+name, "must be valid UTF-8 (no invalid bytes, no lone surrogate escapes)")
	}
	return s, nil
}

// boolean reads a required true/false member.
func (m refMembers) boolean(name string) (bool, *FieldError) {
	raw, ok := m.get(name)
	if !ok {
		return false, fieldErr(m.prefix+name, "is missing; it must be true or false")
	}
	if refKindOf(raw) != "boolean" {
		return false, m.typeErr(name, "boolean", raw)
	}
	return raw[0] == 't', nil
}

// integer reads a whole-number member in [lo, hi]; rule words the range for
// errors. A missing member is an error when required and 0 otherwise.
func (m refMembers) integer(name string, lo, hi int64, rule string, required bool) (int64, *FieldError) {
	raw, ok := m.get(name)
	if !ok {
		if required {
			return 0, fieldErr(m.prefix+name, "is missing; it must be %s", rule)
		}
		return 0, nil
	}
	if refKindOf(raw) != "number" {
		return 0, fieldErr(m.prefix+name, "must be %s written as a JSON number, got a JSON %s", rule, refKindOf(raw))
	}
	v, whole, inRange := refWholeNumber(string(raw))
	switch {
	case !whole:
		return 0, fieldErr(m.prefix+name, "must be %s; %s is not a whole number", rule, refClip(string(raw)))
	case !inRange || v < lo || v > hi:
		return 0, fieldErr(m.prefix+name, "must be %s, got %s", rule, refClip(string(raw)))
	}
	return v, nil
}

// object reads an optional object member; ok is false when it is missing
// or null.
func (m refMembers) object(name string) (refMembers, bool, *FieldError) {
	raw, ok := m.get(name)
	if !ok {
		return refMembers{}, false, nil
	}
	if refKindOf(raw) != "object" {
		return refMembers{}, false, m.typeErr(name, "object", raw)
	}
	var obj refObject
	if err := json.Unmarshal(raw, &obj); err != nil {
		// Cannot happen: raw is a syntactically valid object.
		return refMembers{}, false, m.typeErr(name, "object", raw)
	}
	return refMembers{obj: obj, prefix: m.prefix + name + "."}, true, nil
}

// decodeString decodes a JSON string literal. ok is false when the literal
// is not a string or does not encode valid UTF-8: encoding/json would
// silently replace invalid bytes and lone surrogates with U+FFFD.
func refDecodeString(raw json.RawMessage) (string, bool) {
	if refKindOf(raw) != "string" || !utf8.Valid(raw) {
		return "", false
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]), true // no escapes: the text is the string
	}
	if refLoneSurrogate(raw) {
		return "", false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// loneSurrogate reports whether a syntactically valid JSON string literal
// has a \u escape of a UTF-16 surrogate that is not part of a pair.
func refLoneSurrogate(lit []byte) bool {
	for i := 0; i < len(lit); i++ {
		if lit[i] != '\\' {
			continue
		}
		i++
		if i >= len(lit) || lit[i] != 'u' || i+4 >= len(lit) {
			continue
		}
		r := refHex4(lit[i+1 : i+5])
		i += 4
		switch {
		case r >= 0xD800 && r <= 0xDBFF:
			if i+6 < len(lit) && lit[i+1] == '\\' && lit[i+2] == 'u' {
				if r2 := refHex4(lit[i+3 : i+7]); r2 >= 0xDC00 && r2 <= 0xDFFF {
					i += 6
					continue
				}
			}
			return true
		case r >= 0xDC00 && r <= 0xDFFF:
			return true
		}
	}
	return false
}

func refHex4(b []byte) rune {
	var r rune
	for _, c := range b {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}

// wholeNumber evaluates a syntactically valid JSON number literal exactly,
// without going through float64 (which would round 3.0000000000000001 to
// 3). whole is false when the value has a fractional part; inRange is false
// when it does not fit an int64. 3, 3.0, 3e0 and 0.3e1 are all the whole
// number 3.
func refWholeNumber(lit string) (v int64, whole, inRange bool) {
	neg := strings.HasPrefix(lit, "-")
	lit = strings.TrimPrefix(lit, "-")
	mant, expPart := lit, ""
	if i := strings.IndexAny(lit, "eE"); i >= 0 {
		mant, expPart = lit[:i], lit[i+1:]
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		return 0, true, true // zero, whatever the exponent
	}
	exp := int64(-len(frac))
	trimmed := strings.TrimRight(digits, "0")
	exp += int64(len(digits) - len(trimmed))
	digits = trimmed
	if expPart != "" {
		x, err := strconv.ParseInt(expPart, 10, 64)
		const big = 1 << 40 // far beyond any int64, far from overflowing exp
		if err != nil || x > big || x < -big {
			if strings.HasPrefix(expPart, "-") {
				return 0, false, false // a non-zero digit times 10^-huge
			}
			return 0, true, false
		}
		exp += x
	}
	if exp < 0 {
		return 0, false, false
	}
	if int64(len(digits))+exp > 19 {
		return 0, true, false
	}
	u, err := strconv.ParseUint(digits+strings.Repeat("0", int(exp)), 10, 64)
	if err != nil || u > math.MaxInt64 {
		return 0, true, false
	}
	if neg {
		return -int64(u), true, true
	}
	return int64(u), true, true
}

func refDecodeV1(_ []byte, obj refObject) (*Attempt, error) {
	a, ferr := refAttemptV1(refMembers{obj: obj})
	if ferr != nil {
		return nil, reject(ReasonInvalidField, ferr)
	}
	if err := refValidate(a); err != nil {
		return nil, reject(ReasonInvalidField, err)
	}
	return a, nil
}

var (
	refAttemptRule = fmt.Sprintf("an integer from 0 to %d", MaxAttempt)
	refTokensRule  = fmt.Sprintf("an integer from 0 to %d", int64(MaxTokens))
	refStatusRule  = "an HTTP status from 100 to 599, or 0 when there is none"
)

// attemptV1 reads the members of a v1 body in the order of the contract and
// stops at the first one that is missing or of the wrong type or range.
// Validate then checks the rules that span fields.
func refAttemptV1(m refMembers) (*Attempt, *FieldError) {
	a := &Attempt{Schema: SchemaV1}
	var err *FieldError
	str := func(name string, dst *string, required bool) {
		if err == nil {
			*dst, err = m.str(name, required)
		}
	}
	str("event_id", &a.EventID, true)
	str("request_id", &a.RequestID, true)
	str("session_id", &a.SessionID, true)
	if err != nil {
		return nil, err
	}
	n, err := m.integer("attempt", 0, MaxAttempt, refAttemptRule, true)
	if err != nil {
		return nil, err
	}
	a.Attempt = int(n)
	var outcome string
	str("outcome", &outcome, true)
	if err != nil {
		return nil, err
	}
	a.Outcome = Outcome(outcome)
	if a.Final, err = m.boolean("final"); err != nil {
		return nil, err
	}
	str("provider", &a.Provider, true)
	str("model", &a.Model, true)
	if err != nil {
		return nil, err
	}
	u, ok, err := m.object("usage")
	if err != nil {
		return nil, err
	}
	if ok {
		for _, f := range []struct {
			name string
			dst  *int64
		}{
			{"input_tokens", &a.Usage.InputTokens},
			{"output_tokens", &a.Usage.OutputTokens},
			{"cache_read_input_tokens", &a.Usage.CacheReadInputTokens},
			{"cache_creation_input_tokens", &a.Usage.CacheCreationInputTokens},
			{"cache_creation_1h_input_tokens", &a.Usage.CacheCreation1hInputTokens},
			{"reasoning_tokens", &a.Usage.ReasoningTokens},
		} {
			if *f.dst, err = u.integer(f.name, 0, MaxTokens, refTokensRule, false); err != nil {
				return nil, err
			}
		}
	}
	e, ok, err := m.object("error")
	if err != nil {
		return nil, err
	}
	if ok {
		if a.Outcome == OutcomeSuccess {
			return nil, fieldErr("error", "must be absent when outcome is %q", OutcomeSuccess)
		}
		if a.Error, err = refErrorV1(e); err != nil {
			return nil, err
		}
	}
	var started, finished string
	str("started_at", &started, true)
	str("finished_at", &finished, true)
	if err != nil {
		return nil, err
	}
	if a.StartedAt, err = refParseTime("started_at", started); err != nil {
		return nil, err
	}
	if a.FinishedAt, err = refParseTime("finished_at", finished); err != nil {
		return nil, err
	}
	str("provider_request_id", &a.ProviderRequestID, false)
	str("service_tier", &a.ServiceTier, false)
	if err != nil {
		return nil, err
	}
	if a.EstimatedInputTokens, err = m.integer("estimated_input_tokens", 0, MaxTokens, refTokensRule, false); err != nil {
		return nil, err
	}
	if a.Labels, err = refLabels(m); err != nil {
		return nil, err
	}
	return a, nil
}

// refLabels reads the labels member. Added with labels (issue 20),
// deliberately in both places: missing, null or {} is nil; the values
// must be strings of valid UTF-8, checked in key order.
func refLabels(m refMembers) (api.Labels, *FieldError) {
	raw, ok := m.get("labels")
	if !ok {
		return nil, nil
	}
	if refKindOf(raw) != "object" {
		return nil, m.typeErr("labels", "object", raw)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || len(obj) == 0 {
		return nil, nil
	}
	l := make(api.Labels, len(obj))
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		field := fmt.Sprintf("labels[%q]", refClip(k))
		if kind := refKindOf(obj[k]); kind != "string" {
			return nil, fieldErr(field, "must be a JSON string, got a JSON %s", kind)
		}
		v, ok := refDecodeString(obj[k])
		if !ok {
			return nil, fieldErr(field, "must be valid UTF-8 (no invalid bytes, no lone surrogate escapes)")
		}
		l[k] = v
	}
	return l, nil
}

// errorV1 reads the error object: kind and retryable are required, status
// defaults to 0 and message to "".
func refErrorV1(e refMembers) (*AttemptError, *FieldError) {
	ae := &AttemptError{}
	kind, err := e.str("kind", true)
	if err != nil {
		return nil, err
	}
	ae.Kind = ErrorKind(kind)
	status, err := e.integer("status", 0, 599, refStatusRule, false)
	if err != nil {
		return nil, err
	}
	ae.Status = int(status)
	if ae.Retryable, err = e.boolean("retryable"); err != nil {
		return nil, err
	}
	if ae.Message, err = e.str("message", false); err != nil {
		return nil, err
	}
	return ae, nil
}

// parseTime reads an RFC 3339 time and normalises it to UTC. The UTC year
// must have four digits so that the time can be written back the
// contract's way.
func refParseTime(field, s string) (time.Time, *FieldError) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fieldErr(field, "must be an RFC 3339 time such as 2026-01-02T15:04:05.123456789Z, got %q", refClip(s))
	}
	t = t.UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		return time.Time{}, fieldErr(field, "must fall between the years 0000 and 9999 in UTC, got %q", refClip(s))
	}
	return t, nil
}

// clip keeps echoed input short in error details.
func refClip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// refValidate is Validate as it was: it checks an attempt against every
// rule of wire contract v1 that does not depend on the subject or on other
// events, and returns a *FieldError naming the first field that breaks a
// rule.
func refValidate(a *Attempt) error {
	if _, known := decoders[a.Schema]; !known {
		return fieldErr("schema", "must be %q, got %q", SchemaV1, refClip(a.Schema))
	}
	if err := refValidateULID(a.EventID); err != nil {
		return err
	}
	if err := ValidateID("request_id", a.RequestID); err != nil {
		return err
	}
	if err := ValidateID("session_id", a.SessionID); err != nil {
		return err
	}
	if a.Attempt < 0 || a.Attempt > MaxAttempt {
		return fieldErr("attempt", "must be an integer from 0 to %d, got %d", MaxAttempt, a.Attempt)
	}
	switch a.Outcome {
	case OutcomeSuccess:
		if a.Error != nil {
			return fieldErr("error", "must be absent when outcome is %q", OutcomeSuccess)
		}
		if !a.Final {
			return fieldErr("final", "must be true when outcome is %q: no attempt follows a success", OutcomeSuccess)
		}
	case OutcomeError:
		if a.Error == nil {
			return fieldErr("error", "is missing; it must be present when outcome is %q", OutcomeError)
		}
		if err := refValidateError(a.Error); err != nil {
			return err
		}
	default:
		return fieldErr("outcome", "must be %q or %q, got %q", OutcomeSuccess, OutcomeError, refClip(string(a.Outcome)))
	}
	if err := refTextField("provider", a.Provider, MaxProviderLength, true); err != nil {
		return err
	}
	if err := refTextField("model", a.Model, MaxModelLength, true); err != nil {
		return err
	}
	if err := refValidateUsage(a.Usage); err != nil {
		return err
	}
	if a.StartedAt.IsZero() {
		return fieldErr("started_at", "is missing")
	}
	if a.FinishedAt.IsZero() {
		return fieldErr("finished_at", "is missing")
	}
	for _, f := range []struct {
		name string
		t    time.Time
	}{{"started_at", a.StartedAt}, {"finished_at", a.FinishedAt}} {
		if y := f.t.UTC().Year(); y < 0 || y > 9999 {
			return fieldErr(f.name, "must fall between the years 0000 and 9999 in UTC, got year %d", y)
		}
	}
	if a.FinishedAt.Before(a.StartedAt) {
		return fieldErr("finished_at", "must not be before started_at (%s < %s)", refFormatTime(a.FinishedAt), refFormatTime(a.StartedAt))
	}
	if err := refTextField("provider_request_id", a.ProviderRequestID, MaxProviderReqID, false); err != nil {
		return err
	}
	if len(a.ServiceTier) > MaxServiceTierLength {
		return fieldErr("service_tier", "must be at most %d bytes, got %d", MaxServiceTierLength, len(a.ServiceTier))
	}
	for i, c := range []byte(a.ServiceTier) {
		if !strings.ContainsRune("abcdefghijklmnopqrstuvwxyz0123456789_-", rune(c)) {
			return fieldErr("service_tier", "has %q at position %d; it must be empty or up to %d characters of a-z, 0-9, '_' or '-'", refClip(string(c)), i, MaxServiceTierLength)
		}
	}
	if a.EstimatedInputTokens < 0 || a.EstimatedInputTokens > MaxTokens {
		return fieldErr("estimated_input_tokens", "must be an integer from 0 to %d, got %d", int64(MaxTokens), a.EstimatedInputTokens)
	}
	if err := a.Labels.Validate(); err != nil {
		le := err.(*api.LabelError)
		field := "labels"
		if le.Key != "" {
			field = fmt.Sprintf("labels[%q]", refClip(le.Key))
		}
		return &FieldError{Field: field, Rule: le.Rule, Err: le}
	}
	return nil
}

func refValidateError(e *AttemptError) error {
	if !e.Kind.Valid() {
		return fieldErr("error.kind", "must be one of rate_limit, overloaded, timeout, connection, server, client, auth, quota, canceled, circuit_open, other; got %q", refClip(string(e.Kind)))
	}
	if e.Status != 0 && (e.Status < 100 || e.Status > 599) {
		return fieldErr("error.status", "must be an HTTP status from 100 to 599, or 0 when there is none; got %d", e.Status)
	}
	if len(e.Message) > MaxMessageBytes {
		return fieldErr("error.message", "must be at most %d bytes, got %d", MaxMessageBytes, len(e.Message))
	}
	if !utf8.ValidString(e.Message) {
		return fieldErr("error.message", "must be valid UTF-8")
	}
	return nil
}

func refValidateUsage(u Usage) error {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"usage.input_tokens", u.InputTokens},
		{"usage.output_tokens", u.OutputTokens},
		{"usage.cache_read_input_tokens", u.CacheReadInputTokens},
		{"usage.cache_creation_input_tokens", u.CacheCreationInputTokens},
		{"usage.cache_creation_1h_input_tokens", u.CacheCreation1hInputTokens},
		{"usage.reasoning_tokens", u.ReasoningTokens},
	} {
		if f.v < 0 || f.v > MaxTokens {
			return fieldErr(f.name, "must be an integer from 0 to %d, got %d", int64(MaxTokens), f.v)
		}
	}
	if u.CacheReadInputTokens+u.CacheCreationInputTokens > u.InputTokens {
		return fieldErr("usage.input_tokens", "must include the cache tokens: cache_read_input_tokens (%d) + cache_creation_input_tokens (%d) exceed input_tokens (%d)",
			u.CacheReadInputTokens, u.CacheCreationInputTokens, u.InputTokens)
	}
	if u.CacheCreation1hInputTokens > u.CacheCreationInputTokens {
		return fieldErr("usage.cache_creation_1h_input_tokens", "is part of cache_creation_input_tokens and must not exceed it: %d > %d",
			u.CacheCreation1hInputTokens, u.CacheCreationInputTokens)
	}
	if u.ReasoningTokens > u.OutputTokens {
		return fieldErr("usage.reasoning_tokens", "is part of output_tokens and must not exceed it: %d > %d",
			u.ReasoningTokens, u.OutputTokens)
	}
	return nil
}

func refValidateULID(id string) error {
	if id == "" {
		return fieldErr("event_id", "is missing; it must be a ULID")
	}
	parsed, err := ulid.ParseStrict(id)
	if err != nil || parsed.String() != id {
		return fieldErr("event_id", "must be a ULID of 26 upper-case Crockford base32 characters, got %q", refClip(id))
	}
	return nil
}

func refTextField(field, s string, max int, required bool) error {
	switch {
	case required && s == "":
		return fieldErr(field, "is missing")
	case len(s) > max:
		return fieldErr(field, "must be at most %d bytes, got %d", max, len(s))
	case !utf8.ValidString(s):
		return fieldErr(field, "must be valid UTF-8")
	}
	return nil
}

// refWireAttempt is the JSON layout of a v1 event as the reference encoder
// writes it.
type refWireAttempt struct {
	Schema            string        `json:"schema"`
	EventID           string        `json:"event_id"`
	RequestID         string        `json:"request_id"`
	SessionID         string        `json:"session_id"`
	Attempt           int           `json:"attempt"`
	Outcome           Outcome       `json:"outcome"`
	Final             bool          `json:"final"`
	Provider          string        `json:"provider"`
	Model             string        `json:"model"`
	Usage             Usage         `json:"usage"`
	Error             *AttemptError `json:"error,omitempty"`
	StartedAt         string        `json:"started_at"`
	FinishedAt        string        `json:"finished_at"`
	ProviderRequestID string        `json:"provider_request_id,omitempty"`
	ServiceTier       string        `json:"service_tier,omitempty"`
	EstimatedInput    int64         `json:"estimated_input_tokens,omitempty"`
	Labels            api.Labels    `json:"labels,omitempty"`
}

// refFormatTime is FormatTime as it was.
func refFormatTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

// refMarshal is Marshal as it was: encoding/json over refWireAttempt.
func refMarshal(a *Attempt) ([]byte, error) {
	return json.Marshal(refWireAttempt{
		Schema:            SchemaV1,
		EventID:           a.EventID,
		RequestID:         a.RequestID,
		SessionID:         a.SessionID,
		Attempt:           a.Attempt,
		Outcome:           a.Outcome,
		Final:             a.Final,
		Provider:          a.Provider,
		Model:             a.Model,
		Usage:             a.Usage,
		Error:             a.Error,
		StartedAt:         refFormatTime(a.StartedAt),
		FinishedAt:        refFormatTime(a.FinishedAt),
		ProviderRequestID: a.ProviderRequestID,
		ServiceTier:       a.ServiceTier,
		EstimatedInput:    a.EstimatedInputTokens,
		Labels:            a.Labels,
	})
}
