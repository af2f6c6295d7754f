package events

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// schemaV2 is a made-up later layout, only for this test: the IDs move
// under "call", the provider and model under "model", times under "time",
// the error is called "failure", and input tokens are split the Anthropic
// way (uncached + cache_read + cache_write) instead of carrying the total.
const schemaV2 = "ledger.attempt.v2"

type v2Event struct {
	Schema string `json:"schema"`
	ID     string `json:"id"`
	Call   struct {
		Session string `json:"session"`
		Request string `json:"request"`
		Try     int    `json:"try"`
	} `json:"call"`
	Result struct {
		Outcome string `json:"outcome"`
		Final   bool   `json:"final"`
	} `json:"result"`
	Model struct {
		Provider  string `json:"provider"`
		Name      string `json:"name"`
		RequestID string `json:"provider_request_id"`
	} `json:"model"`
	Tokens struct {
		Input struct {
			Uncached   int64 `json:"uncached"`
			CacheRead  int64 `json:"cache_read"`
			CacheWrite int64 `json:"cache_write"`
		} `json:"input"`
		Output int64 `json:"output"`
	} `json:"tokens"`
	Failure *struct {
		Kind      string `json:"kind"`
		HTTP      int    `json:"http"`
		Retryable bool   `json:"retryable"`
		Text      string `json:"text"`
	} `json:"failure"`
	Time struct {
		Start time.Time `json:"start"`
		End   time.Time `json:"end"`
	} `json:"time"`
}

// decodeV2 maps the v2 layout onto the one Attempt every version decodes
// to, then applies the same Validate as v1.
func decodeV2(data []byte) (*Attempt, error) {
	var e v2Event
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, rejectf(ReasonMalformedJSON, "the body is not a v2 event: %v", err)
	}
	a := &Attempt{
		Schema:    schemaV2,
		EventID:   e.ID,
		RequestID: e.Call.Request,
		SessionID: e.Call.Session,
		Attempt:   e.Call.Try,
		Outcome:   Outcome(e.Result.Outcome),
		Final:     e.Result.Final,
		Provider:  e.Model.Provider,
		Model:     e.Model.Name,
		Usage: Usage{
			InputTokens:              e.Tokens.Input.Uncached + e.Tokens.Input.CacheRead + e.Tokens.Input.CacheWrite,
			OutputTokens:             e.Tokens.Output,
			CacheReadInputTokens:     e.Tokens.Input.CacheRead,
			CacheCreationInputTokens: e.Tokens.Input.CacheWrite,
		},
		StartedAt:         e.Time.Start.UTC(),
		FinishedAt:        e.Time.End.UTC(),
		ProviderRequestID: e.Model.RequestID,
	}
	if f := e.Failure; f != nil {
		a.Error = &AttemptError{Kind: ErrorKind(f.Kind), Status: f.HTTP, Retryable: f.Retryable, Message: f.Text}
	}
	if err := a.Validate(); err != nil {
		return nil, reject(ReasonInvalidField, err)
	}
	return a, nil
}

// v2Body writes the v2 form of a v1 attempt.
func v2Body(t *testing.T, a Attempt, try int) []byte {
	t.Helper()
	failure := "null"
	if a.Error != nil {
		failure = fmt.Sprintf(`{"kind":%q,"http":%d,"retryable":%t,"text":%q}`, a.Error.Kind, a.Error.Status, a.Error.Retryable, a.Error.Message)
	}
	return fmt.Appendf(nil, `{
		"schema": %q, "id": %q,
		"call": {"session": %q, "request": %q, "try": %d},
		"result": {"outcome": %q, "final": %t},
		"model": {"provider": %q, "name": %q, "provider_request_id": %q},
		"tokens": {"input": {"uncached": %d, "cache_read": %d, "cache_write": %d}, "output": %d},
		"failure": %s,
		"time": {"start": %q, "end": %q}
	}`, schemaV2, a.EventID, a.SessionID, a.RequestID, try, a.Outcome, a.Final,
		a.Provider, a.Model, a.ProviderRequestID,
		a.Usage.InputTokens-a.Usage.CacheReadInputTokens-a.Usage.CacheCreationInputTokens,
		a.Usage.CacheReadInputTokens, a.Usage.CacheCreationInputTokens, a.Usage.OutputTokens,
		failure, FormatTime(a.StartedAt), FormatTime(a.FinishedAt))
}

// TestSchemaEvolution shows how a new event version is added: a decoder
// that maps the new layout onto the same Attempt, registered beside v1,
// while v1 events keep decoding exactly as before. Not parallel:
// RegisterDecoder must not race with Decode.
func TestSchemaEvolution(t *testing.T) {
	v1Success, v1Error := readTestdata(t, successFile), readTestdata(t, errorFile)
	success, err := Decode(v1Success)
	require.NoError(t, err)
	failure, err := Decode(v1Error)
	require.NoError(t, err)
	v2Success, v2Error := v2Body(t, *success, success.Attempt), v2Body(t, *failure, failure.Attempt)

	_, err = Decode(v2Success)
	requireReject(t, err, ReasonUnknownSchema, "")

	RegisterDecoder(schemaV2, decodeV2)
	t.Cleanup(func() { unregisterDecoder(schemaV2) })

	t.Run("v1 events decode unchanged beside v2", func(t *testing.T) {
		for _, tt := range []struct {
			body []byte
			want *Attempt
		}{{v1Success, success}, {v1Error, failure}} {
			got, err := Decode(tt.body)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		}
		_, err := Decode(mutated(t, successFile, set("attempt", 1001)))
		requireReject(t, err, ReasonInvalidField, "attempt")
	})

	t.Run("v2 events decode to the same attempt", func(t *testing.T) {
		for _, tt := range []struct {
			body []byte
			want *Attempt
		}{{v2Success, success}, {v2Error, failure}} {
			got, err := Decode(tt.body)
			require.NoError(t, err)
			assert.Equal(t, schemaV2, got.Schema, "Schema records the layout the event arrived in")
			want := *tt.want
			want.Schema = schemaV2
			assert.Equal(t, want, *got)
			require.NoError(t, got.Validate())

			// Written back, a v2 attempt is a v1 event.
			data, err := Marshal(got)
			require.NoError(t, err)
			back, err := Decode(data)
			require.NoError(t, err)
			assert.Equal(t, tt.want, back)
		}
	})

	t.Run("v2 events follow the same rules", func(t *testing.T) {
		_, err := Decode(v2Body(t, *success, MaxAttempt+1))
		requireReject(t, err, ReasonInvalidField, "attempt")
		_, err = Decode([]byte(`{"schema":"ledger.attempt.v2","call":[]}`))
		requireReject(t, err, ReasonMalformedJSON, "")
	})

	unregisterDecoder(schemaV2)
	_, err = Decode(v2Success)
	requireReject(t, err, ReasonUnknownSchema, "")
	got, err := Decode(v1Success)
	require.NoError(t, err)
	assert.Equal(t, success, got)
}
