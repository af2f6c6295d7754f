package events

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"

	"github.com/agentledger/ledger/api"
)

// Decode parses an attempt event of any version this package knows and
// validates it. It never panics. The error, when not nil, is always a
// *RejectError whose Reason is ReasonTooLarge (a body over MaxEventBytes,
// refused before it is read), ReasonMalformedJSON, ReasonUnknownSchema or
// ReasonInvalidField; for the last, Err is the *FieldError.
//
// Member names are matched exactly (JSON is case-sensitive: "Event_ID" is an
// unknown member, not event_id); when a name appears twice the last one
// counts. Strings must be valid UTF-8 with no lone surrogate escapes.
//
// Decode does not keep data: the strings of the returned Attempt are
// copies, and they share one allocation (as an Attempt and its Error do).
//
// Decode is the single place that knows event versions: a new version adds
// a decoder to the table below that returns the same Attempt, so that old
// events replay unchanged under new code.
func Decode(data []byte) (*Attempt, error) { return DecodeInterned(data, nil) }

// DecodeInterned is Decode, the event's labels taken from in when it holds
// an equal set (else decoded and kept there): the returned event's Labels
// may be shared with other events, and must not be written. A nil in
// interns nothing.
func DecodeInterned(data []byte, in *LabelInterner) (*Attempt, error) {
	if err := CheckSize(len(data)); err != nil {
		return nil, err
	}
	b := eventBody{labelSets: in}
	if !b.scan(data) {
		return nil, malformedBody(data)
	}
	v := b.top[fSchema]
	if v.end == 0 {
		return nil, rejectf(ReasonUnknownSchema, "the event has no schema field; expected %q", SchemaV1)
	}
	if v.kind != kindString {
		return nil, rejectf(ReasonUnknownSchema, "schema must be a string such as %q, got a JSON %s", SchemaV1, kindNames[v.kind])
	}
	schema, ok := b.text(v)
	if !ok {
		return nil, rejectf(ReasonUnknownSchema, "schema must be valid UTF-8 such as %q", SchemaV1)
	}
	dec, ok := decoders[string(schema)]
	if !ok {
		return nil, rejectf(ReasonUnknownSchema, "schema %q is not known to this aggregator; it knows %q", clip(string(schema)), SchemaV1)
	}
	if dec != nil {
		return dec(data)
	}
	return b.decodeV1()
}

// CheckSize returns the too_large reject of a body of size bytes when it is
// over MaxEventBytes, else nil.
func CheckSize(size int) error {
	if size <= MaxEventBytes {
		return nil
	}
	return rejectf(ReasonTooLarge, "the body is %d bytes; an event body is at most %d bytes (64 KiB)", size, MaxEventBytes)
}

// decoder decodes and validates the body of one schema version. nil stands
// for the built-in v1 decoder, which reads the body Decode already scanned.
type decoder func(data []byte) (*Attempt, error)

// decoders maps a schema to its decoder.
var decoders = map[string]decoder{SchemaV1: nil}

// RegisterDecoder adds a decoder for another schema version; it is meant for
// tests that show old events replaying beside a newer layout. Decode calls
// dec only for bodies that are a JSON object whose schema member is the
// given schema. dec must not be nil. It is not safe to call concurrently
// with Decode.
func RegisterDecoder(schema string, dec func([]byte) (*Attempt, error)) {
	decoders[schema] = dec
}

// malformedBody is the reject of a body that scan refused: the wording is
// encoding/json's, which is why this rare path asks it.
func malformedBody(data []byte) *RejectError {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return malformed(err)
	}
	if obj == nil {
		return rejectf(ReasonMalformedJSON, "the body must be a JSON object, got JSON null")
	}
	// Not reached: scan accepts every object encoding/json accepts
	// (FuzzDecodeMatchesReference holds it to that).
	return rejectf(ReasonMalformedJSON, "the body is not valid JSON")
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

// text returns the text of a string value: the literal itself when it has
// no escapes, a decoded copy when it has. ok is false when it is not valid
// UTF-8 or has a lone surrogate escape (encoding/json would silently put
// U+FFFD in their place).
func (b *eventBody) text(v lit) ([]byte, bool) {
	raw := b.data[v.start+1 : v.end-1]
	switch {
	case v.flags&flagEscaped != 0:
		return unescape(raw)
	case v.flags&flagNonASCII != 0 && !utf8.Valid(raw):
		return nil, false
	}
	return raw, true
}

// unescape decodes the content of a string literal that has escapes; ok
// is false when it is not valid UTF-8 or has a \u escape of a UTF-16
// surrogate that is not part of a pair.
func unescape(raw []byte) ([]byte, bool) {
	if !utf8.Valid(raw) {
		return nil, false
	}
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			j := i + 1
			for j < len(raw) && raw[j] != '\\' {
				j++
			}
			out = append(out, raw[i:j]...)
			i = j
			continue
		}
		if i+1 >= len(raw) {
			return nil, false // not reached: scan checked the escapes
		}
		switch e := raw[i+1]; e {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			if i+6 > len(raw) {
				return nil, false // not reached: scan checked the escapes
			}
			r := hex4(raw[i+2 : i+6])
			switch {
			case r >= 0xD800 && r <= 0xDBFF:
				if i+12 > len(raw) || raw[i+6] != '\\' || raw[i+7] != 'u' {
					return nil, false
				}
				r2 := hex4(raw[i+8 : i+12])
				if r2 < 0xDC00 || r2 > 0xDFFF {
					return nil, false
				}
				r = 0x10000 + (r-0xD800)<<10 + (r2 - 0xDC00)
				i += 6
			case r >= 0xDC00 && r <= 0xDFFF:
				return nil, false
			}
			out = utf8.AppendRune(out, r)
			i += 6
			continue
		default: // '"', '\\' or '/'
			out = append(out, e)
		}
		i += 2
	}
	return out, true
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

func typeErr(name, want string, v lit) *FieldError {
	return fieldErr(name, "must be a JSON %s, got a JSON %s", want, kindNames[v.kind])
}

// str reads a string member. A missing one is an error when required and
// empty otherwise.
func (b *eventBody) str(name string, v lit, required bool) ([]byte, *FieldError) {
	if v.end == 0 {
		if required {
			return nil, fieldErr(name, "is missing")
		}
		return nil, nil
	}
	if v.kind != kindString {
		return nil, typeErr(name, "string", v)
	}
	s, ok := b.text(v)
	if !ok {
		return nil, fieldErr(name, "must be valid UTF-8 (no invalid bytes, no lone surrogate escapes)")
	}
	return s, nil
}

// boolean reads a required true/false member.
func (b *eventBody) boolean(name string, v lit) (bool, *FieldError) {
	if v.end == 0 {
		return false, fieldErr(name, "is missing; it must be true or false")
	}
	if v.kind != kindBool {
		return false, typeErr(name, "boolean", v)
	}
	return b.data[v.start] == 't', nil
}

// integer reads a whole-number member in [lo, hi]; rule words the range for
// errors. A missing member is an error when required and 0 otherwise.
func (b *eventBody) integer(name string, v lit, lo, hi int64, rule string, required bool) (int64, *FieldError) {
	if v.end == 0 {
		if required {
			return 0, fieldErr(name, "is missing; it must be %s", rule)
		}
		return 0, nil
	}
	if v.kind != kindNumber {
		return 0, fieldErr(name, "must be %s written as a JSON number, got a JSON %s", rule, kindNames[v.kind])
	}
	raw := b.data[v.start:v.end]
	var n int64
	whole, inRange := true, true
	if v.flags&flagSmallInt != 0 {
		digits := raw
		if raw[0] == '-' {
			digits = raw[1:]
		}
		for _, c := range digits {
			n = n*10 + int64(c-'0')
		}
		if raw[0] == '-' {
			n = -n
		}
	} else {
		n, whole, inRange = wholeNumber(string(raw))
	}
	switch {
	case !whole:
		return 0, fieldErr(name, "must be %s; %s is not a whole number", rule, clip(string(raw)))
	case !inRange || n < lo || n > hi:
		return 0, fieldErr(name, "must be %s, got %s", rule, clip(string(raw)))
	}
	return n, nil
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

var (
	attemptRule = fmt.Sprintf("an integer from 0 to %d", MaxAttempt)
	tokensRule  = fmt.Sprintf("an integer from 0 to %d", int64(MaxTokens))
	statusRule  = "an HTTP status from 100 to 599, or 0 when there is none"
)

func (b *eventBody) decodeV1() (*Attempt, error) {
	a, ferr := b.attemptV1()
	if ferr != nil {
		return nil, reject(ReasonInvalidField, ferr)
	}
	if err := a.Validate(); err != nil {
		return nil, reject(ReasonInvalidField, err)
	}
	return a, nil
}

// attemptAndError lets an error attempt and its AttemptError share one
// allocation.
type attemptAndError struct {
	attempt Attempt
	err     AttemptError
}

// attemptV1 reads the members of a v1 body in the order of the contract and
// stops at the first one that is missing or of the wrong type or range.
// Validate then checks the rules that span fields.
func (b *eventBody) attemptV1() (*Attempt, *FieldError) {
	t := &b.top
	eventID, err := b.str("event_id", t[fEventID], true)
	if err != nil {
		return nil, err
	}
	requestID, err := b.str("request_id", t[fRequestID], true)
	if err != nil {
		return nil, err
	}
	sessionID, err := b.str("session_id", t[fSessionID], true)
	if err != nil {
		return nil, err
	}
	attempt, err := b.integer("attempt", t[fAttempt], 0, MaxAttempt, attemptRule, true)
	if err != nil {
		return nil, err
	}
	outcome, err := b.str("outcome", t[fOutcome], true)
	if err != nil {
		return nil, err
	}
	final, err := b.boolean("final", t[fFinal])
	if err != nil {
		return nil, err
	}
	provider, err := b.str("provider", t[fProvider], true)
	if err != nil {
		return nil, err
	}
	model, err := b.str("model", t[fModel], true)
	if err != nil {
		return nil, err
	}
	var usage Usage
	if v := t[fUsage]; v.end != 0 {
		if v.kind != kindObject {
			return nil, typeErr("usage", "object", v)
		}
		u := &b.usage
		if usage.InputTokens, err = b.integer("usage.input_tokens", u[uInput], 0, MaxTokens, tokensRule, false); err != nil {
			return nil, err
		}
		if usage.OutputTokens, err = b.integer("usage.output_tokens", u[uOutput], 0, MaxTokens, tokensRule, false); err != nil {
			return nil, err
		}
		if usage.CacheReadInputTokens, err = b.integer("usage.cache_read_input_tokens", u[uCacheRead], 0, MaxTokens, tokensRule, false); err != nil {
			return nil, err
		}
		if usage.CacheCreationInputTokens, err = b.integer("usage.cache_creation_input_tokens", u[uCacheCreation], 0, MaxTokens, tokensRule, false); err != nil {
			return nil, err
		}
		if usage.CacheCreation1hInputTokens, err = b.integer("usage.cache_creation_1h_input_tokens", u[uCacheCreation1h], 0, MaxTokens, tokensRule, false); err != nil {
			return nil, err
		}
		if usage.ReasoningTokens, err = b.integer("usage.reasoning_tokens", u[uReasoning], 0, MaxTokens, tokensRule, false); err != nil {
			return nil, err
		}
	}
	var (
		hasError              bool
		kind, message         []byte
		status                int64
		retryable             bool
		startedAt, finishedAt []byte
	)
	if v := t[fError]; v.end != 0 {
		if v.kind != kindObject {
			return nil, typeErr("error", "object", v)
		}
		if string(outcome) == string(OutcomeSuccess) {
			return nil, fieldErr("error", "must be absent when outcome is %q", OutcomeSuccess)
		}
		e := &b.err
		hasError = true
		if kind, err = b.str("error.kind", e[eKind], true); err != nil {
			return nil, err
		}
		if status, err = b.integer("error.status", e[eStatus], 0, 599, statusRule, false); err != nil {
			return nil, err
		}
		if retryable, err = b.boolean("error.retryable", e[eRetryable]); err != nil {
			return nil, err
		}
		if message, err = b.str("error.message", e[eMessage], false); err != nil {
			return nil, err
		}
	}
	if startedAt, err = b.str("started_at", t[fStartedAt], true); err != nil {
		return nil, err
	}
	if finishedAt, err = b.str("finished_at", t[fFinishedAt], true); err != nil {
		return nil, err
	}
	started, err := parseTime("started_at", startedAt)
	if err != nil {
		return nil, err
	}
	finished, err := parseTime("finished_at", finishedAt)
	if err != nil {
		return nil, err
	}
	providerRequestID, err := b.str("provider_request_id", t[fProviderRequestID], false)
	if err != nil {
		return nil, err
	}
	serviceTier, err := b.str("service_tier", t[fServiceTier], false)
	if err != nil {
		return nil, err
	}
	estimatedInput, err := b.integer("estimated_input_tokens", t[fEstimatedInput], 0, MaxTokens, tokensRule, false)
	if err != nil {
		return nil, err
	}
	labels, err := b.labels(t[fLabels])
	if err != nil {
		return nil, err
	}

	// Every member is read. The attempt (with its error) is one
	// allocation, and the strings it keeps are another.
	var a *Attempt
	if hasError {
		both := &attemptAndError{}
		a = &both.attempt
		a.Error = &both.err
		a.Error.Status = int(status)
		a.Error.Retryable = retryable
	} else {
		a = &Attempt{}
	}
	a.Schema = SchemaV1
	a.Attempt = int(attempt)
	a.Final = final
	a.Usage = usage
	a.EstimatedInputTokens = estimatedInput
	a.Labels = labels
	a.StartedAt = started
	a.FinishedAt = finished
	var keep keptStrings
	keep.add(&a.EventID, eventID)
	keep.add(&a.RequestID, requestID)
	keep.add(&a.SessionID, sessionID)
	keep.add(&a.Provider, provider)
	keep.add(&a.Model, model)
	keep.add(&a.ProviderRequestID, providerRequestID)
	keep.add(&a.ServiceTier, serviceTier)
	if a.Outcome = Outcome(known(outcome, string(OutcomeSuccess), string(OutcomeError))); a.Outcome == "" {
		keep.add((*string)(&a.Outcome), outcome)
	}
	if hasError {
		if a.Error.Kind = knownKind(kind); a.Error.Kind == "" {
			keep.add((*string)(&a.Error.Kind), kind)
		}
		keep.add(&a.Error.Message, message)
	}
	keep.copy()
	return a, nil
}

// labels reads the labels member. Missing, null or {} is no labels (nil);
// else it must be an object whose values are strings. A key given twice
// counts once, with its last value (as the body's members do). Keys are
// decoded as encoding/json decodes them (an invalid byte or a lone
// surrogate becomes U+FFFD, which the key grammar then refuses); values
// must be valid UTF-8. Values are checked in key order, so the error does
// not depend on the order of the members. The rules of the pairs (count,
// key grammar, lengths, control characters) are Validate's.
//
// The labels cost one map and one string: every key and value is a slice
// of one copy.
func (b *eventBody) labels(v lit) (api.Labels, *FieldError) {
	if v.end == 0 {
		return nil, nil
	}
	if v.kind != kindObject {
		return nil, typeErr("labels", "object", v)
	}
	// The object's syntax is checked already: walk it without checks.
	data := b.data[:v.end]
	var buf [api.MaxLabels]labelPair
	pairs := buf[:0]
	for i := skipWS(data, v.start+1); data[i] != '}'; {
		end, flags := scanString(data, i)
		p := labelPair{key: b.labelKey(lit{start: i, end: end, kind: kindString, flags: flags})}
		i = skipWS(data, skipWS(data, end)+1) // past the ':'
		p.val.start = i
		i, p.val.kind, p.val.flags = scanValue(data, i, 1)
		p.val.end = i
		pairs = append(pairs, p)
		if i = skipWS(data, i); data[i] == ',' {
			i = skipWS(data, i+1)
		}
	}
	// Sorted by key, the last of equal keys kept (the sort is stable).
	slices.SortStableFunc(pairs, func(a, b labelPair) int { return bytes.Compare(a.key, b.key) })
	n, size := 0, 0
	for r := range pairs {
		if r+1 < len(pairs) && bytes.Equal(pairs[r].key, pairs[r+1].key) {
			continue
		}
		p := pairs[r]
		if p.val.kind != kindString {
			return nil, fieldErr(labelField(string(p.key)), "must be a JSON string, got a JSON %s", kindNames[p.val.kind])
		}
		var ok bool
		if p.text, ok = b.text(p.val); !ok {
			return nil, fieldErr(labelField(string(p.key)), "must be valid UTF-8 (no invalid bytes, no lone surrogate escapes)")
		}
		pairs[n] = p
		n++
		size += len(p.key) + len(p.text)
	}
	if n == 0 {
		return nil, nil
	}
	var key []byte
	if b.labelSets != nil {
		// The set's canonical form: each key and value preceded by its
		// length, so that no two sets share one.
		var buf [512]byte
		key = buf[:0]
		for _, p := range pairs[:n] {
			key = binary.AppendUvarint(key, uint64(len(p.key)))
			key = append(key, p.key...)
			key = binary.AppendUvarint(key, uint64(len(p.text)))
			key = append(key, p.text...)
		}
		if l := b.labelSets.get(key); l != nil {
			return l, nil
		}
	}
	var sb strings.Builder
	sb.Grow(size)
	for _, p := range pairs[:n] {
		sb.Write(p.key)
		sb.Write(p.text)
	}
	all, off := sb.String(), 0
	l := make(api.Labels, n)
	for _, p := range pairs[:n] {
		k := all[off : off+len(p.key)]
		off += len(p.key)
		l[k] = all[off : off+len(p.text)]
		off += len(p.text)
	}
	if b.labelSets != nil {
		b.labelSets.put(key, l)
	}
	return l, nil
}

// labelPair is a member of labels as labels reads it.
type labelPair struct {
	key  []byte // decoded
	val  lit
	text []byte // the value's, once checked
}

// labelKey decodes the name of a member of labels, as encoding/json does.
func (b *eventBody) labelKey(v lit) []byte {
	if s, ok := b.text(v); ok {
		return s
	}
	var s string
	_ = json.Unmarshal(b.data[v.start:v.end], &s) // rare: invalid UTF-8 becomes U+FFFD
	return []byte(s)
}

// labelField names a label in errors: labels["team"].
func labelField(key string) string { return fmt.Sprintf("labels[%q]", clip(key)) }

// ValidateLabels checks labels against the contract's rules
// (api.Labels.Validate) and returns a *FieldError naming the label
// (labels["KEY"], or labels for the count) and the rule, which wraps the
// *api.LabelError; nil when they are valid.
func ValidateLabels(l api.Labels) error {
	err := l.Validate()
	if err == nil {
		return nil
	}
	var le *api.LabelError
	if !errors.As(err, &le) {
		return fieldErr("labels", "%s", err.Error()) // not reached: Validate returns a *LabelError
	}
	field := "labels"
	if le.Key != "" {
		field = labelField(le.Key)
	}
	return &FieldError{Field: field, Rule: le.Rule, Err: le}
}

// keptStrings copies the strings of one attempt out of the body into one
// allocation: at most maxKept of them (event_id, request_id, session_id,
// provider, model, provider_request_id, service_tier, and an unknown
// outcome, an unknown error kind and the error's message).
type keptStrings struct {
	n   int
	dst [maxKept]*string
	src [maxKept][]byte
}

const maxKept = 10

// add asks for src to be copied to *dst.
func (k *keptStrings) add(dst *string, src []byte) {
	k.dst[k.n], k.src[k.n] = dst, src
	k.n++
}

// copy copies every string asked for.
func (k *keptStrings) copy() {
	size := 0
	for _, src := range k.src[:k.n] {
		size += len(src)
	}
	var sb strings.Builder
	sb.Grow(size)
	for _, src := range k.src[:k.n] {
		sb.Write(src)
	}
	all, off := sb.String(), 0
	for i, dst := range k.dst[:k.n] {
		*dst = all[off : off+len(k.src[i])]
		off += len(k.src[i])
	}
}

// known returns the one of names that s spells, without allocating, or ""
// when it spells none.
func known(s []byte, names ...string) string {
	for _, name := range names {
		if string(s) == name {
			return name
		}
	}
	return ""
}

// knownKind returns the ErrorKind constant s spells, without allocating,
// or "" when it spells none.
func knownKind(s []byte) ErrorKind {
	switch ErrorKind(s) {
	case KindRateLimit:
		return KindRateLimit
	case KindOverloaded:
		return KindOverloaded
	case KindTimeout:
		return KindTimeout
	case KindConnection:
		return KindConnection
	case KindServer:
		return KindServer
	case KindClient:
		return KindClient
	case KindAuth:
		return KindAuth
	case KindQuota:
		return KindQuota
	case KindCanceled:
		return KindCanceled
	case KindCircuitOpen:
		return KindCircuitOpen
	case KindOther:
		return KindOther
	}
	return ""
}

// parseTime reads an RFC 3339 time and normalises it to UTC. The UTC year
// must have four digits so that the time can be written back the
// contract's way.
func parseTime(field string, v []byte) (time.Time, *FieldError) {
	if t, ok := parseUTC(v); ok {
		return t, nil
	}
	s := string(v)
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

// parseUTC is the fast path of parseTime for the layout the contract asks
// publishers for, 2006-01-02T15:04:05Z with 0 to 9 fractional digits. It
// computes what time.Parse(time.RFC3339Nano, s) does for such a string and
// returns false for anything else (time.Parse then decides).
func parseUTC(v []byte) (time.Time, bool) {
	const short = len("2006-01-02T15:04:05Z")
	if len(v) < short || len(v) == short+1 || len(v) > short+10 || v[len(v)-1] != 'Z' ||
		v[4] != '-' || v[7] != '-' || v[10] != 'T' || v[13] != ':' || v[16] != ':' {
		return time.Time{}, false
	}
	ok := true
	num := func(b []byte, lo, hi int) int {
		n := 0
		for _, c := range b {
			if c < '0' || c > '9' {
				ok = false
			}
			n = n*10 + int(c-'0')
		}
		if n < lo || n > hi {
			ok = false
		}
		return n
	}
	year := num(v[0:4], 0, 9999)
	month := num(v[5:7], 1, 12)
	hour := num(v[11:13], 0, 23)
	minute := num(v[14:16], 0, 59)
	sec := num(v[17:19], 0, 59)
	if !ok {
		return time.Time{}, false
	}
	day := num(v[8:10], 1, daysIn(month, year))
	nsec := 0
	if frac := v[19 : len(v)-1]; len(frac) > 0 {
		if frac[0] != '.' {
			return time.Time{}, false
		}
		nsec = num(frac[1:], 0, 999999999)
		for range 10 - len(frac) {
			nsec *= 10
		}
	}
	if !ok {
		return time.Time{}, false
	}
	return time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC), true
}

// daysIn is the number of days of a month (1 to 12) of a proleptic
// Gregorian year.
func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
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
	if err := validateUsage(a.Usage); err != nil {
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
	if err := textField("provider_request_id", a.ProviderRequestID, MaxProviderReqID, false); err != nil {
		return err
	}
	if err := validateServiceTier(a.ServiceTier); err != nil {
		return err
	}
	if a.EstimatedInputTokens < 0 || a.EstimatedInputTokens > MaxTokens {
		return fieldErr("estimated_input_tokens", "must be an integer from 0 to %d, got %d", int64(MaxTokens), a.EstimatedInputTokens)
	}
	if err := ValidateLabels(a.Labels); err != nil {
		return err
	}
	return nil
}

// validateServiceTier checks the service_tier rule: "" (unknown) or 1 to
// MaxServiceTierLength bytes of a-z, 0-9, '_' or '-'.
func validateServiceTier(tier string) error {
	if len(tier) > MaxServiceTierLength {
		return fieldErr("service_tier", "must be at most %d bytes, got %d", MaxServiceTierLength, len(tier))
	}
	for i := 0; i < len(tier); i++ {
		if !serviceTierByte(tier[i]) {
			return fieldErr("service_tier", "has %q at position %d; it must be empty or up to %d characters of a-z, 0-9, '_' or '-'", clip(tier[i:i+1]), i, MaxServiceTierLength)
		}
	}
	return nil
}

func serviceTierByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// ServiceTier returns the tier a provider reported in the contract's form:
// lower case, and "" when what remains breaks the service_tier rule (too
// long, or other characters), so that an odd answer loses its tier rather
// than its event. Adapters pass every tier they read through it.
func ServiceTier(reported string) string {
	tier := strings.ToLower(strings.TrimSpace(reported))
	if validateServiceTier(tier) != nil {
		return ""
	}
	return tier
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

func validateUsage(u Usage) error {
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
	for _, s := range [...]struct {
		part, whole       string
		partN, wholeCount int64
	}{
		{"cache_creation_1h_input_tokens", "cache_creation_input_tokens", u.CacheCreation1hInputTokens, u.CacheCreationInputTokens},
		{"reasoning_tokens", "output_tokens", u.ReasoningTokens, u.OutputTokens},
	} {
		if s.partN > s.wholeCount {
			return fieldErr("usage."+s.part, "is part of %s and must not exceed it: %d > %d", s.whole, s.partN, s.wholeCount)
		}
	}
	return nil
}

func validateULID(id string) error {
	if id == "" {
		return fieldErr("event_id", "is missing; it must be a ULID")
	}
	if !canonicalULID(id) {
		return fieldErr("event_id", "must be a ULID of 26 upper-case Crockford base32 characters, got %q", clip(id))
	}
	return nil
}

// canonicalULID reports whether id is how ulid.ULID.String writes some
// ULID: 26 characters of ulid.Encoding, the first at most '7' (more would
// overflow 128 bits). It is what ulid.ParseStrict(id) followed by
// String() == id decides, without the allocation of String.
func canonicalULID(id string) bool {
	if len(id) != ulid.EncodedSize || id[0] > '7' {
		return false
	}
	for i := 0; i < len(id); i++ {
		if !ulidChar[id[i]] {
			return false
		}
	}
	return true
}

// ulidChar marks the characters of ulid.Encoding.
var ulidChar = func() (t [256]bool) {
	for i := 0; i < len(ulid.Encoding); i++ {
		t[ulid.Encoding[i]] = true
	}
	return t
}()

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
