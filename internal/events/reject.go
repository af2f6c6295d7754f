package events

import "fmt"

// Reason is why an event was rejected; it names the LEDGER_REJECTED subject.
type Reason string

// Reject reasons of wire contract v1.
const (
	ReasonTooLarge        Reason = "too_large"
	ReasonMalformedJSON   Reason = "malformed_json"
	ReasonUnknownSchema   Reason = "unknown_schema"
	ReasonInvalidField    Reason = "invalid_field"
	ReasonSubjectMismatch Reason = "subject_mismatch"
	ReasonSessionConflict Reason = "session_conflict"
)

// Headers on a LEDGER_REJECTED record.
const (
	HeaderRejectReason    = "Ledger-Reject-Reason"
	HeaderRejectDetail    = "Ledger-Reject-Detail"
	HeaderOriginalSubject = "Ledger-Original-Subject"
	// HeaderOriginalSize is present when the record keeps only the first
	// MaxEventBytes of the body: the size the body had.
	HeaderOriginalSize = "Ledger-Original-Size"
)

// Sizes of a LEDGER_REJECTED record. It keeps the original body whole up
// to MaxEventBytes (every body the contract allows), else its first
// MaxEventBytes; the detail and the original subject are cut to
// MaxRejectDetailBytes and MaxRejectSubjectBytes, so that every record
// fits MaxRejectedMsgBytes, the stream's MaxMsgSize.
const (
	MaxRejectDetailBytes  = 1 << 10
	MaxRejectSubjectBytes = 4 << 10
	MaxRejectedMsgBytes   = MaxEventBytes + 16<<10
)

// RejectError is an event that is not valid: the reason (for the subject)
// and a sentence a person understands (for the detail header).
type RejectError struct {
	Reason Reason
	Detail string
	// Err is the underlying error, a *FieldError for ReasonInvalidField.
	Err error
}

func (e *RejectError) Error() string { return string(e.Reason) + ": " + e.Detail }

// Unwrap returns the underlying error.
func (e *RejectError) Unwrap() error { return e.Err }

func reject(reason Reason, err error) *RejectError {
	return &RejectError{Reason: reason, Detail: err.Error(), Err: err}
}

func rejectf(reason Reason, format string, args ...any) *RejectError {
	return &RejectError{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}
