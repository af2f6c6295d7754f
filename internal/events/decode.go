package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"
)

// Decode parses an attempt event of any version this package knows and
// validates it. It never panics. The error, when not nil, is always a
// *RejectError whose Reason is ReasonMalformedJSON, ReasonUnknownSchema or
// ReasonInvalidField; for the last, Err is the *FieldError.
//
// Decode is the single place that knows event versions: a new version adds
// a decoder to the table below that returns the same Attempt, so that old
// events replay unchanged under new code.
func Decode(data []byte) (*Attempt, error) {
	var probe struct {
		Schema json.RawMessage `json:"schema"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, malformed(err)
	}
	if len(probe.Schema) == 0 || bytes.Equal(probe.Schema, []byte("null")) {
		return nil, rejectf(ReasonUnknownSchema, "the event has no schema field; expected %q", SchemaV1)
	}
	var schema string
	if err := json.Unmarshal(probe.Schema, &schema); err != nil {
		return nil, rejectf(ReasonUnknownSchema, "schema must be a string such as %q, got %s", SchemaV1, clip(string(probe.Schema)))
	}
	dec, ok := decoders[schema]
	if !ok {
		return nil, rejectf(ReasonUnknownSchema, "schema %q is not known to this aggregator; it knows %q", clip(schema), SchemaV1)
	}
	return dec(data)
}

// decoders maps a schema to the function that decodes and validates it.
var decoders = map[string]func([]byte) (*Attempt, error){}

func init() { decoders[SchemaV1] = decodeV1 }

// RegisterDecoder adds a decoder for another schema version; it is meant for
// tests that show old events replaying beside a newer layout. It is not safe
// to call concurrently with Decode.
func RegisterDecoder(schema string, dec func([]byte) (*Attempt, error)) {
	decoders[schema] = dec
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

// v1 is the raw layout of a v1 event: pointers and json.Number tell a
// missing field from a zero one and an integer from a fraction.
type v1 struct {
	Schema            string          `json:"schema"`
	EventID           *string         `json:"event_id"`
	RequestID         *string         `json:"request_id"`
	SessionID         *string         `json:"session_id"`
	Attempt           *json.Number    `json:"attempt"`
	Outcome           *string         `json:"outcome"`
	Final             *bool           `json:"final"`
	Provider          *string         `json:"provider"`
	Model             *string         `json:"model"`
	Usage             *v1Usage        `json:"usage"`
	Error             json.RawMessage `json:"error"`
	StartedAt         *string         `json:"started_at"`
	FinishedAt        *string         `json:"finished_at"`
	ProviderRequestID *string         `json:"provider_request_id"`
}

type v1Usage struct {
	InputTokens              *json.Number `json:"input_tokens"`
	OutputTokens             *json.Number `json:"output_tokens"`
	CacheReadInputTokens     *json.Number `json:"cache_read_input_tokens"`
	CacheCreationInputTokens *json.Number `json:"cache_creation_input_tokens"`
}

type v1Error struct {
	Kind      *string      `json:"kind"`
	Status    *json.Number `json:"status"`
	Retryable *bool        `json:"retryable"`
	Message   *string      `json:"message"`
}

func decodeV1(data []byte) (*Attempt, error) {
	var r v1
	if err := json.Unmarshal(data, &r); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, reject(ReasonInvalidField, fieldErr(te.Field, "must be a JSON %s, got a JSON %s", jsonKind(te.Type.String()), te.Value))
		}
		return nil, malformed(err)
	}
	a, ferr := r.attempt()
	if ferr != nil {
		return nil, reject(ReasonInvalidField, ferr)
	}
	if err := a.Validate(); err != nil {
		return nil, reject(ReasonInvalidField, err)
	}
	return a, nil
}

func (r *v1) attempt() (*Attempt, *FieldError) {
	a := &Attempt{Schema: r.Schema}
	var err *FieldError
	str := func(field string, p *string, dst *string) {
		if err != nil {
			return
		}
		if p == nil {
			err = fieldErr(field, "is missing")
			return
		}
		*dst = *p
	}
	str("event_id", r.EventID, &a.EventID)
	str("request_id", r.RequestID, &a.RequestID)
	str("session_id", r.SessionID, &a.SessionID)
	if err != nil {
		return nil, err
	}
	if r.Attempt == nil {
		return nil, fieldErr("attempt", "is missing; it must be an integer from 0 to %d", MaxAttempt)
	}
	n, ferr := integer("attempt", *r.Attempt, 0, MaxAttempt)
	if ferr != nil {
		return nil, ferr
	}
	a.Attempt = int(n)
	var outcome string
	str("outcome", r.Outcome, &outcome)
	a.Outcome = Outcome(outcome)
	if err != nil {
		return nil, err
	}
	if r.Final == nil {
		return nil, fieldErr("final", "is missing; it must be true or false")
	}
	a.Final = *r.Final
	str("provider", r.Provider, &a.Provider)
	str("model", r.Model, &a.Model)
	if err != nil {
		return nil, err
	}
	if u := r.Usage; u != nil {
		for _, f := range []struct {
			name string
			n    *json.Number
			dst  *int64
		}{
			{"usage.input_tokens", u.InputTokens, &a.Usage.InputTokens},
			{"usage.output_tokens", u.OutputTokens, &a.Usage.OutputTokens},
			{"usage.cache_read_input_tokens", u.CacheReadInputTokens, &a.Usage.CacheReadInputTokens},
			{"usage.cache_creation_input_tokens", u.CacheCreationInputTokens, &a.Usage.CacheCreationInputTokens},
		} {
			if f.n == nil {
				continue
			}
			v, ferr := integer(f.name, *f.n, 0, MaxTokens)
			if ferr != nil {
				return nil, ferr
			}
			*f.dst = v
		}
	}
	if len(r.Error) > 0 && !bytes.Equal(r.Error, []byte("null")) {
		var e v1Error
		if jerr := json.Unmarshal(r.Error, &e); jerr != nil {
			var te *json.UnmarshalTypeError
			if errors.As(jerr, &te) && te.Field != "" {
				return nil, fieldErr("error."+te.Field, "must be a JSON %s, got a JSON %s", jsonKind(te.Type.String()), te.Value)
			}
			return nil, fieldErr("error", "must be an object with kind, status, retryable and message")
		}
		ae := &AttemptError{}
		if e.Kind == nil {
			return nil, fieldErr("error.kind", "is missing")
		}
		ae.Kind = ErrorKind(*e.Kind)
		if e.Status != nil {
			s, ferr := integer("error.status", *e.Status, 0, 999)
			if ferr != nil {
				return nil, ferr
			}
			ae.Status = int(s)
		}
		if e.Retryable == nil {
			return nil, fieldErr("error.retryable", "is missing; it must be true or false")
		}
		ae.Retryable = *e.Retryable
		if e.Message != nil {
			ae.Message = *e.Message
		}
		a.Error = ae
	}
	var started, finished string
	str("started_at", r.StartedAt, &started)
	str("finished_at", r.FinishedAt, &finished)
	if err != nil {
		return nil, err
	}
	var ferr2 *FieldError
	if a.StartedAt, ferr2 = parseTime("started_at", started); ferr2 != nil {
		return nil, ferr2
	}
	if a.FinishedAt, ferr2 = parseTime("finished_at", finished); ferr2 != nil {
		return nil, ferr2
	}
	if r.ProviderRequestID != nil {
		a.ProviderRequestID = *r.ProviderRequestID
	}
	return a, nil
}

// integer reads a JSON number that must be a whole number in [lo, hi].
// 3, 3.0 and 3e0 are the same whole number; 3.5 is not.
func integer(field string, n json.Number, lo, hi int64) (int64, *FieldError) {
	s := string(n)
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return 0, fieldErr(field, "must be an integer from %d to %d, got %s", lo, hi, clip(s))
		}
		if f != math.Trunc(f) {
			return 0, fieldErr(field, "must be a whole number, got %s", clip(s))
		}
		if f < float64(lo) || f > float64(hi) {
			return 0, fieldErr(field, "must be from %d to %d, got %s", lo, hi, clip(s))
		}
		v = int64(f)
	}
	if v < lo || v > hi {
		return 0, fieldErr(field, "must be from %d to %d, got %s", lo, hi, clip(s))
	}
	return v, nil
}

func parseTime(field, s string) (time.Time, *FieldError) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fieldErr(field, "must be an RFC 3339 time such as 2026-01-02T15:04:05.123456789Z, got %q", clip(s))
	}
	return t.UTC(), nil
}

func jsonKind(goType string) string {
	switch goType {
	case "string", "*string":
		return "string"
	case "bool", "*bool":
		return "boolean"
	case "json.Number", "*json.Number":
		return "number"
	}
	return "object"
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
