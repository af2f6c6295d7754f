package retry

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/guard"
)

// ErrCircuitOpen is the breaker's sentinel, re-exported: the error of a call
// that a breaker rejected satisfies errors.Is(err, ErrCircuitOpen), and
// errors.As with *breaker.OpenError gives the details.
var ErrCircuitOpen = breaker.ErrCircuitOpen

// ErrInvalidOptions is the sentinel that every *OptionsError wraps.
var ErrInvalidOptions = errors.New("retry: invalid options")

// OptionsError says which field of Options breaks which rule.
type OptionsError struct {
	Field string // the Go name of the field, e.g. "Sink"
	Rule  string
	// Err is the underlying error, e.g. a *PolicyError for Field "Policy".
	Err error
}

func (e *OptionsError) Error() string {
	s := ErrInvalidOptions.Error() + ": " + e.Field + " " + e.Rule
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns ErrInvalidOptions and the underlying error, if any.
func (e *OptionsError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalidOptions}
	}
	return []error{ErrInvalidOptions, e.Err}
}

// ErrInvalidCall is returned by Do when it is called without a context, a
// Middleware or a function. (Invalid IDs give an *events.FieldError.)
var ErrInvalidCall = errors.New("retry: invalid call")

// StopReason says why a call ended without success (api.StopReason).
type StopReason = api.StopReason

// The reasons a call ends without success. StopPanicked's CallError has
// the *PanicError as Cause; StopRateLimit's the *guard.LimitError (so
// errors.Is(err, ErrRateLimited) holds), StopBudget's the
// *guard.BudgetError (errors.Is(err, ErrBudgetSpent)).
const (
	StopNonRetryable = api.StopNonRetryable
	StopExhausted    = api.StopExhausted
	StopHintOverCap  = api.StopHintOverCap
	StopDeadline     = api.StopDeadline
	StopCanceled     = api.StopCanceled
	StopCircuitOpen  = api.StopCircuitOpen
	StopPanicked     = api.StopPanicked
	StopRateLimit    = api.StopRateLimit
	StopBudget       = api.StopBudget
)

// ErrRateLimited is matched (errors.Is) by the error of a call that a rate
// limit held past the caller's deadline.
var ErrRateLimited = guard.ErrRateLimited

// ErrBudgetSpent is matched by the error of a call that ended because the
// upstream's retry budget was spent.
var ErrBudgetSpent = guard.ErrBudgetSpent

// ErrPanicked is the sentinel that every *PanicError wraps.
var ErrPanicked = errors.New("retry: panicked")

// PanicError is a panic of one of the middleware's collaborators that Do
// recovered: the Classifier's (the call's error, as Cause of its
// *CallError) or the Sink's (passed to Options.OnSinkError and logged like
// any refused event).
type PanicError struct {
	// Component is "classifier" or "sink".
	Component string
	// Value is what was passed to panic (a *runtime.PanicNilError for
	// panic(nil)).
	Value any
	// Stack is the panicking goroutine's stack at the recovery, as
	// runtime/debug.Stack gives it.
	Stack []byte
}

// newPanicError records the panic v of component with the current stack.
func newPanicError(component string, v any) *PanicError {
	return &PanicError{Component: component, Value: v, Stack: debug.Stack()}
}

func (e *PanicError) Error() string {
	return "retry: " + e.Component + " panicked: " + fmt.Sprint(e.Value)
}

// Unwrap returns ErrPanicked and, when the panic's value is an error, that
// error.
func (e *PanicError) Unwrap() []error {
	if err, ok := e.Value.(error); ok {
		return []error{ErrPanicked, err}
	}
	return []error{ErrPanicked}
}

// CallError is the error Do returns for a call that ended without success.
//
// It unwraps to Err, the last error fn returned, so errors.As on a
// provider SDK's error type works, and to Cause, what ended the call when
// that was not fn's error: the breaker's *breaker.OpenError (so
// errors.Is(err, ErrCircuitOpen) holds), the caller's context error, or
// the Classifier's *PanicError (so errors.Is(err, ErrPanicked) holds).
type CallError struct {
	// RequestID is the call's request_id.
	RequestID string
	// Attempts is how many times fn was called (attempts rejected by the
	// breaker or skipped because the caller's context was done are not
	// counted, although each has an event).
	Attempts int
	// Reason says why the call ended.
	Reason StopReason
	// Classification is that of the attempt that ended the call (kind
	// circuit_open or canceled when no attempt was made).
	Classification Classification
	// Err is the last error fn returned; nil when fn never failed.
	Err error
	// Cause is what ended the call when it is not Err: the breaker's
	// rejection, the caller's context error or the Classifier's
	// *PanicError; otherwise nil.
	Cause error
}

func (e *CallError) Error() string {
	s := "retry: request " + e.RequestID + ": " + string(e.Reason) + " after " + strconv.Itoa(e.Attempts)
	if e.Attempts == 1 {
		s += " attempt: "
	} else {
		s += " attempts: "
	}
	s += string(e.Classification.Kind)
	if e.Classification.Status != 0 {
		s += " (status " + strconv.Itoa(e.Classification.Status) + ")"
	}
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns Cause and Err, those that are set.
func (e *CallError) Unwrap() []error {
	switch {
	case e.Cause == nil && e.Err == nil:
		return nil
	case e.Cause == nil:
		return []error{e.Err}
	case e.Err == nil:
		return []error{e.Cause}
	}
	return []error{e.Cause, e.Err}
}

// Is makes errors.Is(err, ErrCircuitOpen) true for a breaker rejection even
// when the breaker's error does not wrap the sentinel.
func (e *CallError) Is(target error) bool {
	return target == ErrCircuitOpen && e.Reason == StopCircuitOpen
}

// fieldError builds the *events.FieldError for a Call field.
func fieldError(field, rule string) *events.FieldError {
	return &events.FieldError{Field: field, Rule: rule}
}
