package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"
)

// Decode parses an attempt event of any version this package knows and
// validates it. It never panics. The error, when not nil, is always a
// *RejectError whose Reason is ReasonMalformedJSON, ReasonUnknownSchema or
// ReasonInvalidField; for the last, Err is the *FieldError.
//
// Member names are matched exactly (JSON is case-sensitive: "Event_ID" is an
// unknown member, not event_id); when a name appears twice the last one
// counts. Strings must be valid UTF-8 with no lone surrogate escapes.
//
// Decode is the single place that knows event versions: a new version adds
// a decoder to the table below that returns the same Attempt, so that old
// events replay unchanged under new code.
func Decode(data []byte) (*Attempt, error) {
	obj, rerr := parseBody(data)
	if rerr != nil {
		return nil, rerr
	}
	raw, ok := obj["schema"]
	if !ok || kindOf(raw) == "null" {
		return nil, rejectf(ReasonUnknownSchema, "the event has no schema field; expected %q", SchemaV1)
	}
	schema, ok := decodeString(raw)
	if !ok {
		if kindOf(raw) == "string" {
			return nil, rejectf(ReasonUnknownSchema, "schema must be valid UTF-8 such as %q", SchemaV1)
		}
		return nil, rejectf(ReasonUnknownSchema, "schema must be a string such as %q, got a JSON %s", SchemaV1, kindOf(raw))
	}
	dec, ok := decoders[schema]
	if !ok {
		return nil, rejectf(ReasonUnknownSchema, "schema %q is not known to this aggregator; it knows %q", clip(schema), SchemaV1)
	}
	return dec(data, obj)
}

// decoder decodes and validates the body of one schema version; obj is the
// body already parsed into its members.
type decoder func(data []byte, obj object) (*Attempt, error)

// decoders maps a schema to its decoder.
var decoders = map[string]decoder{}

func init() { decoders[SchemaV1] = decodeV1 }

// RegisterDecoder adds a decoder for another schema version; it is meant for
// tests that show old events replaying beside a newer layout. It is not safe
// to call concurrently with Decode.
func RegisterDecoder(schema string, dec func([]byte) (*Attempt, error)) {
	decoders[schema] = func(data []byte, _ object) (*Attempt, error) { return dec(data) }
}

// object is a JSON object whose members are looked up by exact name.
type object map[string]json.RawMessage

// parseBody reads the event body, which must be a JSON object.
func parseBody(data []byte) (object, *RejectError) {
	var obj object
	if err := json.Unmarshal(data, &obj); err != nil {
		return nil, malformed(err)
	}
	if obj == nil {
		return nil, rejectf(ReasonMalformedJSON, "the body must be a JSON object, got JSON null")
	}
	return obj, nil
}

func malformed(err error) *RejectError {
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
func kindOf(raw json.RawMessage) string {
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
type members struct {
	obj    object
	prefix string
}

// get returns the member's raw value; a null member counts as missing.
func (m members) get(name string) (json.RawMessage, bool) {
	raw, ok := m.obj[name]
	if !ok || kindOf(raw) == "null" {
		return nil, false
	}
	return raw, true
}

func (m members) typeErr(name, want string, raw json.RawMessage) *FieldError {
	return fieldErr(m.prefix+name, "must be a JSON %s, got a JSON %s", want, kindOf(raw))
}

// str reads a string member. A missing one is an error when required and
// "" otherwise.
func (m members) str(name string, required bool) (string, *FieldError) {
	raw, ok := m.get(name)
	if !ok {
		if required {
			return "", fieldErr(m.prefix+name, "is missing")
		}
		return "", nil
	}
	if kindOf(raw) != "string" {
		return "", m.typeErr(name, "string", raw)
	}
	s, ok := decodeString(raw)
	if !ok {
		return "", fieldErr(m.prefix+name, "must be valid UTF-8 (no invalid bytes, no lone surrogate escapes)")
	}
	return s, nil
}

// boolean reads a required true/false member.
func (m members) boolean(name string) (bool, *FieldError) {
	raw, ok := m.get(name)
	if !ok {
		return false, fieldErr(m.prefix+name, "is missing; it must be true or false")
	}
	if kindOf(raw) != "boolean" {
		return false, m.typeErr(name, "boolean", raw)
	}
	return raw[0] == 't', nil
}

// integer reads a whole-number member in [lo, hi]; rule words the range for
// errors. A missing member is an error when required and 0 otherwise.
func (m members) integer(name string, lo, hi int64, rule string, required bool) (int64, *FieldError) {
	raw, ok := m.get(name)
	if !ok {
		if required {
			return 0, fieldErr(m.prefix+name, "is missing; it must be %s", rule)
		}
		return 0, nil
	}
	if kindOf(raw) != "number" {
		return 0, fieldErr(m.prefix+name, "must be %s written as a JSON number, got a JSON %s", rule, kindOf(raw))
	}
	v, whole, inRange := wholeNumber(string(raw))
	switch {
	case !whole:
		return 0, fieldErr(m.prefix+name, "must be %s; %s is not a whole number", rule, clip(string(raw)))
	case !inRange || v < lo || v > hi:
		return 0, fieldErr(m.prefix+name, "must be %s, got %s", rule, clip(string(raw)))
	}
	return v, nil
}

// object reads an optional object member; ok is false when it is missing
// or null.
func (m members) object(name string) (members, bool, *FieldError) {
	raw, ok := m.get(name)
	if !ok {
		return members{}, false, nil
	}
	if kindOf(raw) != "object" {
		return members{}, false, m.typeErr(name, "object", raw)
	}
	var obj object
	if err := json.Unmarshal(raw, &obj); err != nil {
		// Cannot happen: raw is a syntactically valid object.
		return members{}, false, m.typeErr(name, "object", raw)
	}
	return members{obj: obj, prefix: m.prefix + name + "."}, true, nil
}

// decodeString decodes a JSON string literal. ok is false when the literal
// is not a string or does not encode valid UTF-8: encoding/json would
// silently replace invalid bytes and lone surrogates with U+FFFD.
func decodeString(raw json.RawMessage) (string, bool) {
	if kindOf(raw) != "string" || !utf8.Valid(raw) {
		return "", false
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]), true // no escapes: the text is the string
	}
	if loneSurrogate(raw) {
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
func loneSurrogate(lit []byte) bool {
	for i := 0; i < len(lit); i++ {
		if lit[i] != '\\' {
			continue
		}
		i++
		if i >= len(lit) || lit[i] != 'u' || i+4 >= len(lit) {
			continue
		}
		r := hex4(lit[i+1 : i+5])
		i += 4
		switch {
		case r >= 0xD800 && r <= 0xDBFF:
			if i+6 < len(lit) && lit[i+1] == '\\' && lit[i+2] == 'u' {
				if r2 := hex4(lit[i+3 : i+7]); r2 >= 0xDC00 && r2 <= 0xDFFF {
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

func hex4(b []byte) rune {
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
func wholeNumber(lit string) (v int64, whole, inRange bool) {
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

func decodeV1(_ []byte, obj object) (*Attempt, error) {
	a, ferr := attemptV1(members{obj: obj})
	if ferr != nil {
		return nil, reject(ReasonInvalidField, ferr)
	}
	if err := a.Validate(); err != nil {
		return nil, reject(ReasonInvalidField, err)
	}
	return a, nil
}

var (
	attemptRule = fmt.Sprintf("an integer from 0 to %d", MaxAttempt)
	tokensRule  = fmt.Sprintf("an integer from 0 to %d", int64(MaxTokens))
	statusRule  = "an HTTP status from 100 to 599, or 0 when there is none"
)

// attemptV1 reads the members of a v1 body in the order of the contract and
// stops at the first one that is missing or of the wrong type or range.
// Validate then checks the rules that span fields.
func attemptV1(m members) (*Attempt, *FieldError) {
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
	n, err := m.integer("attempt", 0, MaxAttempt, attemptRule, true)
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
		} {
			if *f.dst, err = u.integer(f.name, 0, MaxTokens, tokensRule, false); err != nil {
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
		if a.Error, err = errorV1(e); err != nil {
			return nil, err
		}
	}
	var started, finished string
	str("started_at", &started, true)
	str("finished_at", &finished, true)
	if err != nil {
		return nil, err
	}
	if a.StartedAt, err = parseTime("started_at", started); err != nil {
		return nil, err
	}
	if a.FinishedAt, err = parseTime("finished_at", finished); err != nil {
		return nil, err
	}
	str("provider_request_id", &a.ProviderRequestID, false)
	if err != nil {
		return nil, err
	}
	return a, nil
}

// errorV1 reads the error object: kind and retryable are required, status
// defaults to 0 and message to "".
func errorV1(e members) (*AttemptError, *FieldError) {
	ae := &AttemptError{}
	kind, err := e.str("kind", true)
	if err != nil {
		return nil, err
	}
	ae.Kind = ErrorKind(kind)
	status, err := e.integer("status", 0, 599, statusRule, false)
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
func parseTime(field, s string) (time.Time, *FieldError) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fieldErr(field, "must be an RFC 3339 time such as 2026-01-02T15:04:05.123456789Z, got %q", clip(s))
	}
	t = t.UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		return time.Time{}, fieldErr(field, "must fall between the years 0000 and 9999 in UTC, got %q", clip(s))
	}
	return t, nil
}

// clip keeps echoed input short in error details.
func clip(s string) string {
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

// Validate checks an attempt against every rule of wire contract v1 that
// does not depend on the subject or on other events. It returns a
// *FieldError naming the first field that breaks a rule.
func (a *Attempt) Validate() error {
	if _, known := decoders[a.Schema]; !known {
		return fieldErr("schema", "must be %q, got %q", SchemaV1, clip(a.Schema))
	}
	if err := validateULID(a.EventID); err != nil {
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
		if err := a.Error.validate(); err != nil {
			return err
		}
	default:
		return fieldErr("outcome", "must be %q or %q, got %q", OutcomeSuccess, OutcomeError, clip(string(a.Outcome)))
	}
	if err := textField("provider", a.Provider, MaxProviderLength, true); err != nil {
		return err
	}
	if err := textField("model", a.Model, MaxModelLength, true); err != nil {
		return err
	}
	if err := a.Usage.validate(); err != nil {
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
		return fieldErr("finished_at", "must not be before started_at (%s < %s)", FormatTime(a.FinishedAt), FormatTime(a.StartedAt))
	}
	return textField("provider_request_id", a.ProviderRequestID, MaxProviderReqID, false)
}

func (e *AttemptError) validate() error {
	if !e.Kind.Valid() {
		return fieldErr("error.kind", "must be one of rate_limit, overloaded, timeout, connection, server, client, auth, quota, canceled, circuit_open, other; got %q", clip(string(e.Kind)))
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

func (u Usage) validate() error {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"usage.input_tokens", u.InputTokens},
		{"usage.output_tokens", u.OutputTokens},
		{"usage.cache_read_input_tokens", u.CacheReadInputTokens},
		{"usage.cache_creation_input_tokens", u.CacheCreationInputTokens},
	} {
		if f.v < 0 || f.v > MaxTokens {
			return fieldErr(f.name, "must be an integer from 0 to %d, got %d", int64(MaxTokens), f.v)
		}
	}
	if u.CacheReadInputTokens+u.CacheCreationInputTokens > u.InputTokens {
		return fieldErr("usage.input_tokens", "must include the cache tokens: cache_read_input_tokens (%d) + cache_creation_input_tokens (%d) exceed input_tokens (%d)",
			u.CacheReadInputTokens, u.CacheCreationInputTokens, u.InputTokens)
	}
	return nil
}

func validateULID(id string) error {
	if id == "" {
		return fieldErr("event_id", "is missing; it must be a ULID")
	}
	parsed, err := ulid.ParseStrict(id)
	if err != nil || parsed.String() != id {
		return fieldErr("event_id", "must be a ULID of 26 upper-case Crockford base32 characters, got %q", clip(id))
	}
	return nil
}

func textField(field, s string, max int, required bool) error {
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

// CheckSubject verifies that an event arrived on the subject its IDs name.
// The error is a *RejectError with ReasonSubjectMismatch.
func CheckSubject(subject string, a *Attempt) error {
	session, request, ok := ParseSubject(subject)
	if !ok {
		return rejectf(ReasonSubjectMismatch, "subject %q is not of the form ledger.attempts.<session_id>.<request_id>", clip(subject))
	}
	if session != a.SessionID || request != a.RequestID {
		return rejectf(ReasonSubjectMismatch, "subject %q names session %q and request %q, but the body has session_id %q and request_id %q",
			clip(subject), clip(session), clip(request), a.SessionID, a.RequestID)
	}
	return nil
}
