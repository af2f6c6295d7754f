package providertest

import (
	"context"
	"net/http"
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
// against the contract's limits, against MessageContains when set and
// against MessageLacks (a part of the body that must stay out of it) when
// set.
type Want struct {
	Kind              events.ErrorKind
	Status            int
	Retryable         bool
	Hint              time.Duration
	HasHint           bool
	ProviderRequestID string
	MessageContains   string
	MessageLacks      string
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
	if want.MessageLacks != "" {
		assert.NotContains(t, got.Message, want.MessageLacks, "message")
	}
}

// HTTPHeader is the reply's header as an http.Header.
func (r Reply) HTTPHeader() http.Header {
	h := http.Header{}
	for k, v := range r.Header {
		h.Set(k, v)
	}
	return h
}

// CheckWire checks that got, the wire-level classification of reply (a
// provider's ClassifyResponse), equals want, the classification of the
// error its SDK made of the same reply. The SDK's response also carries the
// headers the server adds (Date, Content-Length), so of the headers only
// the reply's own are compared, and only when the SDK's error carries the
// response's headers at all (genai's does not).
func CheckWire(t testing.TB, want, got retry.Classification, reply Reply) {
	t.Helper()
	if want.Header != nil {
		h := reply.HTTPHeader()
		for k := range h {
			assert.Equal(t, h.Values(k), got.Header.Values(k), "status %d: header %s", reply.Status, k)
		}
	}
	want.Header, got.Header = nil, nil
	assert.Equal(t, want, got, "status %d %s", reply.Status, reply.Body)
}
