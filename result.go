package ledger

import (
	"context"
	"errors"
)

// Result is what DoResult returns: the value of the call's successful
// attempt and the call's identity, to look the call up in the ledger.
type Result[T any] struct {
	// Value is what the successful attempt returned; the zero value when
	// the call failed.
	Value T
	// RequestID is the call's request_id: Call.RequestID, or the ULID Do
	// made for it. Empty only when the call was refused before its first
	// attempt for an invalid Call.
	RequestID string
	// Attempts is how many times the function was called.
	Attempts int
}

// DoResult is Do, returning the call's request_id and number of attempts
// with the value, on success as on failure (where the *CallError carries
// them too). Do is unchanged: DoResult is for callers that let the
// middleware make the request_id and then need it, to find the call in
// the ledger (ledgertest's Request and WaitRequest) or in their logs.
func DoResult[T any](ctx context.Context, m *Middleware, call Call, fn func(ctx context.Context, a Attempt) (T, Report, error)) (Result[T], error) {
	var res Result[T]
	if fn == nil {
		_, err := Do(ctx, m, call, fn)
		return res, err
	}
	// Do calls fn in the caller's goroutine, one attempt after the other, so
	// the last attempt's writes are the ones seen after it returns.
	v, err := Do(ctx, m, call, func(ctx context.Context, a Attempt) (T, Report, error) {
		res.RequestID = a.RequestID
		res.Attempts = a.Number - call.FirstAttempt + 1
		return fn(ctx, a)
	})
	res.Value = v
	var ce *CallError
	if errors.As(err, &ce) {
		res.RequestID, res.Attempts = ce.RequestID, ce.Attempts
	}
	return res, err
}
