package providertest

import (
	"context"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/retry"
)

// Classify classifies err the way the retry middleware does: with c first,
// then with retry.ClassifyTransport and the caller's context. ok is false
// when neither recognises err.
func Classify(callerCtx context.Context, c retry.Classifier, err error, now time.Time) (retry.Classification, bool) {
	if res, ok := c.Classify(err, now); ok {
		return res, true
	}
	return retry.ClassifyTransport(callerCtx, err)
}

// Want is what a test expects of a classification. The message is checked
// against the contract's limits, and against MessageContains when set.
type Want struct {
	Kind              events.ErrorKind
	Status            int
	Retryable         bool
	Hint              time.Duration
	HasHint           bool
	ProviderRequestID string
	MessageContains   string
}

// Check asserts that got is what want describes.
func Check(t testing.TB, got retry.Classification, want Want) {
	t.Helper()
	assert.Equal(t, want.Kind, got.Kind, "kind")
	assert.Equal(t, want.Status, got.Status, "status")
	assert.Equal(t, want.Retryable, got.Retryable, "retryable")
	assert.Equal(t, want.HasHint, got.HasHint, "has hint")
	assert.Equal(t, want.Hint, got.Hint, "hint")
	assert.Equal(t, want.ProviderRequestID, got.ProviderRequestID, "provider request id")
	require.NotEmpty(t, got.Message, "message")
	assert.LessOrEqual(t, len(got.Message), events.MaxMessageBytes, "message length")
	assert.True(t, utf8.ValidString(got.Message), "message is UTF-8")
	if want.MessageContains != "" {
		assert.Contains(t, got.Message, want.MessageContains, "message")
	}
}
