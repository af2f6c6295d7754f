package events

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/agentledger/ledger/internal/names"
)

// ErrInvalidField is the sentinel that every *FieldError wraps.
var ErrInvalidField = errors.New("invalid field")

// FieldError says which field of an event (or of a call) broke which rule.
type FieldError struct {
	Field string // JSON name of the field, dotted for nested ones ("usage.input_tokens"), labels["KEY"] for a label
	Rule  string // the rule, as a sentence fragment a person understands
	// Err is the error of the rule's own type when there is one (an
	// *api.LabelError for the rules of labels), else nil.
	Err error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Rule }

// Unwrap makes errors.Is(err, ErrInvalidField) true, and errors.As reach
// Err (an *api.LabelError) when there is one.
func (e *FieldError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalidField}
	}
	return []error{ErrInvalidField, e.Err}
}

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Rule: fmt.Sprintf(format, args...)}
}

// IDRule is the rule that session and request IDs follow, worded for errors.
const IDRule = "must be 1 to 128 characters of A-Z, a-z, 0-9, '_' or '-'"

// ValidateID checks a session or request ID against the contract's rule and
// returns a *FieldError naming field when it breaks it.
func ValidateID(field, id string) error {
	if id == "" {
		return fieldErr(field, "is missing; it %s", IDRule)
	}
	if len(id) > MaxIDLength {
		return fieldErr(field, "is %d characters long; it %s", len(id), IDRule)
	}
	for i := 0; i < len(id); i++ {
		if !idByte(id[i]) {
			return fieldErr(field, "has %q at position %d; it %s", quoteByte(id, i), i, IDRule)
		}
	}
	return nil
}

func idByte(c byte) bool { return idBytes[c] }

// idBytes marks the bytes an ID may have: A-Z, a-z, 0-9, '_' and '-'.
var idBytes = func() (t [256]bool) {
	for c := range 256 {
		t[c] = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
	}
	return t
}()

// quoteByte returns the character starting at byte i, for error messages.
func quoteByte(s string, i int) string {
	r, _ := utf8.DecodeRuneInString(s[i:])
	return string(r)
}

// Subject returns the subject an attempt of the given call is published on:
// ledger.attempts.<session_id>.<request_id>. The IDs must be valid.
func Subject(sessionID, requestID string) string {
	var b strings.Builder
	b.Grow(len(names.AttemptsPrefix) + len(sessionID) + 1 + len(requestID))
	b.WriteString(names.AttemptsPrefix)
	b.WriteString(sessionID)
	b.WriteByte('.')
	b.WriteString(requestID)
	return b.String()
}

// ParseSubject splits an attempt subject into its session and request IDs.
// ok is false when the subject does not have exactly the shape
// ledger.attempts.<session_id>.<request_id>.
func ParseSubject(subject string) (sessionID, requestID string, ok bool) {
	rest, found := strings.CutPrefix(subject, names.AttemptsPrefix)
	if !found {
		return "", "", false
	}
	sessionID, requestID, found = strings.Cut(rest, ".")
	if !found || sessionID == "" || requestID == "" || strings.IndexByte(requestID, '.') >= 0 {
		return "", "", false
	}
	return sessionID, requestID, true
}

// RejectedSubject returns the subject a rejected event is recorded under:
// ledger.rejected.<reason>.<original stream sequence>.
func RejectedSubject(reason Reason, streamSeq uint64) string {
	return fmt.Sprintf("%s%s.%d", names.RejectedPrefix, reason, streamSeq)
}
