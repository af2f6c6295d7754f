package retry

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/events"
)

func TestCallError(t *testing.T) {
	sdk := &sdkError{Status: 503}
	open := &breaker.OpenError{Key: "p/m", Until: time.Unix(100, 0), State: breaker.Open}
	tests := []struct {
		name       string
		err        *CallError
		isOpen     bool
		sdk        bool
		isCanceled bool
		contains   []string
	}{
		{"exhausted", &CallError{RequestID: "r1", Attempts: 3, Reason: StopExhausted,
			Classification: Classification{Kind: events.KindOverloaded, Status: 503}, Err: sdk},
			false, true, false, []string{"r1", "retries_exhausted", "3 attempts", "overloaded", "status 503", "sdk: status 503"}},
		{"circuit open at once", &CallError{RequestID: "r2", Reason: StopCircuitOpen,
			Classification: Classification{Kind: events.KindCircuitOpen}, Cause: open},
			true, false, false, []string{"circuit_open", "0 attempts", "circuit open"}},
		{"circuit open after a failure", &CallError{RequestID: "r3", Attempts: 1, Reason: StopCircuitOpen,
			Classification: Classification{Kind: events.KindCircuitOpen}, Cause: open, Err: sdk},
			true, true, false, []string{"1 attempt:"}},
		{"circuit open without the sentinel in the chain", &CallError{Reason: StopCircuitOpen,
			Classification: Classification{Kind: events.KindCircuitOpen}, Cause: errors.New("rejected")},
			true, false, false, nil},
		{"canceled while waiting", &CallError{Reason: StopCanceled, Attempts: 1,
			Classification: Classification{Kind: events.KindCanceled}, Cause: contextCanceled(), Err: sdk},
			false, true, true, []string{"canceled"}},
		{"empty", &CallError{}, false, false, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error = tt.err
			assert.Equal(t, tt.isOpen, errors.Is(err, ErrCircuitOpen))
			var se *sdkError
			assert.Equal(t, tt.sdk, errors.As(err, &se))
			assert.Equal(t, tt.isCanceled, errors.Is(err, errCanceled))
			for _, s := range tt.contains {
				assert.Contains(t, err.Error(), s)
			}
		})
	}
}

var errCanceled = errors.New("canceled by test")

func contextCanceled() error { return errCanceled }

func TestErrCircuitOpenIsTheBreakers(t *testing.T) {
	assert.Same(t, breaker.ErrCircuitOpen, ErrCircuitOpen)
}

func TestOptionsError(t *testing.T) {
	inner := &PolicyError{Field: "Jitter", Rule: "is 2; it must be from 0 to 1"}
	err := error(&OptionsError{Field: "Policy", Rule: "is invalid", Err: inner})
	assert.ErrorIs(t, err, ErrInvalidOptions)
	assert.ErrorIs(t, err, ErrInvalidPolicy)
	assert.Contains(t, err.Error(), "Jitter")
	err = &OptionsError{Field: "Sink", Rule: "is nil; it is required"}
	assert.ErrorIs(t, err, ErrInvalidOptions)
	assert.NotErrorIs(t, err, ErrInvalidPolicy)
	assert.Equal(t, "retry: invalid options: Sink is nil; it is required", err.Error())
}
