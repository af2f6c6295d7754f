package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// Test fixtures: the two human-readable examples under testdata/ and the
// attempts they must decode to.
const (
	successFile = "valid_success.json"
	errorFile   = "valid_error.json"
)

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return data
}

func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(t, err)
	return tm.UTC()
}

// wantSuccess is the attempt testdata/valid_success.json decodes to.
func wantSuccess(t testing.TB) Attempt {
	t.Helper()
	return Attempt{
		Schema:    SchemaV1,
		EventID:   "01JH8Y5WDR3M4N5P6Q7R8S9T0V",
		RequestID: "req_7f3a9c2e",
		SessionID: "agent-42_run-0007",
		Attempt:   1,
		Outcome:   OutcomeSuccess,
		Final:     true,
		Provider:  "anthropic",
		Model:     "claude-sonnet-4-5",
		Usage: Usage{
			InputTokens:              2154,
			OutputTokens:             512,
			CacheReadInputTokens:     2034,
			CacheCreationInputTokens: 0,
		},
		StartedAt:         mustTime(t, "2026-03-14T09:27:06.271828182Z"),
		FinishedAt:        mustTime(t, "2026-03-14T09:27:14.000000001Z"),
		ProviderRequestID: "req_011CTx9R4mWq8Lp3",
	}
}

// wantError is the attempt testdata/valid_error.json decodes to.
func wantError(t testing.TB) Attempt {
	t.Helper()
	return Attempt{
		Schema:    SchemaV1,
		EventID:   "01JH8Y5W9Q2V3X4Z5A6B7C8D9E",
		RequestID: "req_7f3a9c2e",
		SessionID: "agent-42_run-0007",
		Attempt:   0,
		Outcome:   OutcomeError,
		Final:     false,
		Provider:  "anthropic",
		Model:     "claude-sonnet-4-5",
		Usage: Usage{
			InputTokens:              2154,
			OutputTokens:             87,
			CacheReadInputTokens:     1800,
			CacheCreationInputTokens: 234,
		},
		Error: &AttemptError{
			Kind:      KindConnection,
			Status:    0,
			Retryable: true,
			Message:   "stream interrupted after 87 output tokens: unexpected EOF",
		},
		StartedAt:         mustTime(t, "2026-03-14T09:26:53.589793238Z"),
		FinishedAt:        mustTime(t, "2026-03-14T09:27:05.141592653Z"),
		ProviderRequestID: "req_011CTx9QbF7hY2Zk",
	}
}

// mutation edits a generic copy of an event body. Numbers are json.Number
// and json.RawMessage values are written verbatim, so a test can put any
// literal (1.0, 1e12, "\xff") exactly where it wants.
type mutation func(ev map[string]any)

// raw is a JSON literal written verbatim.
func raw(lit string) json.RawMessage { return json.RawMessage(lit) }

// set puts v at a dotted path ("usage.input_tokens"), creating objects on
// the way.
func set(path string, v any) mutation {
	return func(ev map[string]any) {
		keys := strings.Split(path, ".")
		m := ev
		for _, k := range keys[:len(keys)-1] {
			next, ok := m[k].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[k] = next
			}
			m = next
		}
		m[keys[len(keys)-1]] = v
	}
}

// del removes the member at a dotted path.
func del(path string) mutation {
	return func(ev map[string]any) {
		keys := strings.Split(path, ".")
		m := ev
		for _, k := range keys[:len(keys)-1] {
			next, ok := m[k].(map[string]any)
			if !ok {
				return
			}
			m = next
		}
		delete(m, keys[len(keys)-1])
	}
}

// all applies mutations in order.
func all(ms ...mutation) mutation {
	return func(ev map[string]any) {
		for _, m := range ms {
			m(ev)
		}
	}
}

// mutated returns the testdata body name with m applied.
func mutated(t testing.TB, name string, m mutation) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(readTestdata(t, name)))
	dec.UseNumber()
	var ev map[string]any
	require.NoError(t, dec.Decode(&ev))
	if m != nil {
		m(ev)
	}
	out, err := json.Marshal(ev)
	require.NoError(t, err)
	return out
}

// requireReject asserts that err is a *RejectError with the reason, a
// detail that can travel in a NATS header, and — for invalid_field — a
// *FieldError naming field, which the detail names too.
func requireReject(t testing.TB, err error, reason Reason, field string) *RejectError {
	t.Helper()
	var re *RejectError
	require.ErrorAs(t, err, &re, "want a *RejectError, got %T: %v", err, err)
	require.Equal(t, reason, re.Reason, "detail: %s", re.Detail)
	requireHeaderSafe(t, re.Detail)
	require.Equal(t, string(reason)+": "+re.Detail, re.Error())
	var fe *FieldError
	if reason == ReasonInvalidField {
		require.ErrorAs(t, err, &fe, "an invalid_field reject must carry a *FieldError")
		require.Equal(t, field, fe.Field, "detail: %s", re.Detail)
		require.ErrorIs(t, err, ErrInvalidField)
		require.Contains(t, re.Detail, field, "the detail must name the field")
		require.Equal(t, fe.Error(), re.Detail)
	} else {
		require.False(t, errors.As(err, &fe), "a %s reject carries no *FieldError: %v", reason, err)
	}
	return re
}

// requireHeaderSafe asserts that s is a non-empty single line of valid
// UTF-8, so that it survives as the value of a NATS header.
func requireHeaderSafe(t testing.TB, s string) {
	t.Helper()
	require.NotEmpty(t, s)
	require.True(t, utf8.ValidString(s), "not valid UTF-8: %q", s)
	for _, r := range s {
		require.False(t, r < 0x20 || r == 0x7f, "control character %q in %q", r, s)
	}
}

// unregisterDecoder undoes RegisterDecoder; like it, it must not run
// concurrently with Decode.
func unregisterDecoder(schema string) { delete(decoders, schema) }
