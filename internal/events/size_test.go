package events

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/api"
)

// padded returns the success example with an unknown member that makes
// the body exactly size bytes.
func padded(t *testing.T, size int) []byte {
	t.Helper()
	base := bytes.TrimSpace(readTestdata(t, successFile))
	head := append(bytes.TrimSuffix(base, []byte("}")), `,"pad":"`...)
	n := size - len(head) - len(`"}`)
	require.GreaterOrEqual(t, n, 0)
	return append(append(head, bytes.Repeat([]byte{'x'}, n)...), `"}`...)
}

// The contract's size limit: a body of MaxEventBytes is read as any other;
// one byte more is too_large, whatever the body holds, and the detail
// gives the size and the limit.
func TestDecodeSizeLimit(t *testing.T) {
	for _, tc := range []struct {
		name string
		body []byte
		ok   bool
	}{
		{"valid at the limit", padded(t, MaxEventBytes), true},
		{"valid one byte over", padded(t, MaxEventBytes+1), false},
		{"huge error message", []byte(`{"schema":"ledger.attempt.v1","error":{"message":"` + strings.Repeat("m", 700<<10) + `"}}`), false},
		{"huge garbage", bytes.Repeat([]byte{'{'}, 2*MaxEventBytes), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := Decode(tc.body)
			ref, refErr := refDecode(tc.body)
			require.Equal(t, refErr, err, "Decode and the reference agree")
			if tc.ok {
				require.NoError(t, err)
				require.Equal(t, wantSuccess(t), *a)
				require.Equal(t, a, ref)
				return
			}
			re := requireReject(t, err, ReasonTooLarge, "")
			require.Equal(t, fmt.Sprintf("the body is %d bytes; an event body is at most %d bytes (64 KiB)", len(tc.body), MaxEventBytes), re.Detail)
		})
	}
}

// Every event the contract allows fits, as Marshal writes it, with room
// to spare: the longest IDs and strings, each made of characters JSON
// escapes as \u00XX (six bytes each), every number at its largest, and
// 16 labels of the longest key and value ('<', escaped as \u003c: a value
// may not hold control characters).
func TestLargestValidEventFits(t *testing.T) {
	esc := func(n int) string { return strings.Repeat("\x01", n) }
	labels := api.Labels{}
	for i := range api.MaxLabels {
		labels[fmt.Sprintf("k%0*d", api.MaxLabelKeyLength-1, i)] = strings.Repeat("<", api.MaxLabelValueLength)
	}
	late := time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC)
	a := &Attempt{
		Schema: SchemaV1, EventID: "7ZZZZZZZZZZZZZZZZZZZZZZZZZ",
		RequestID: strings.Repeat("r", MaxIDLength), SessionID: strings.Repeat("s", MaxIDLength),
		Attempt: MaxAttempt, Outcome: OutcomeError, Final: true,
		Provider: esc(MaxProviderLength), Model: esc(MaxModelLength),
		Usage: Usage{InputTokens: MaxTokens, OutputTokens: MaxTokens, CacheReadInputTokens: MaxTokens / 2, CacheCreationInputTokens: MaxTokens / 2,
			CacheCreation1hInputTokens: MaxTokens / 2, ReasoningTokens: MaxTokens},
		Error:     &AttemptError{Kind: KindCircuitOpen, Status: 599, Retryable: true, Message: esc(MaxMessageBytes)},
		StartedAt: late, FinishedAt: late, ProviderRequestID: esc(MaxProviderReqID),
		ServiceTier: strings.Repeat("p", MaxServiceTierLength), EstimatedInputTokens: MaxTokens,
		Labels: labels,
	}
	require.NoError(t, a.Validate())
	data, err := Marshal(a)
	require.NoError(t, err)
	t.Logf("largest valid event: %d bytes of %d", len(data), MaxEventBytes)
	require.LessOrEqual(t, len(data), MaxEventBytes/2)
	back, err := Decode(data)
	require.NoError(t, err)
	require.Equal(t, a, back)
}
