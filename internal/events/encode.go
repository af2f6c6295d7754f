package events

import (
	"encoding/json"
	"time"
)

// TimeLayout is how the contract writes times: RFC 3339 in UTC with
// nanoseconds.
const TimeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// wireAttempt is the JSON layout of a v1 event as this package writes it.
type wireAttempt struct {
	Schema            string        `json:"schema"`
	EventID           string        `json:"event_id"`
	RequestID         string        `json:"request_id"`
	SessionID         string        `json:"session_id"`
	Attempt           int           `json:"attempt"`
	Outcome           Outcome       `json:"outcome"`
	Final             bool          `json:"final"`
	Provider          string        `json:"provider"`
	Model             string        `json:"model"`
	Usage             Usage         `json:"usage"`
	Error             *AttemptError `json:"error,omitempty"`
	StartedAt         string        `json:"started_at"`
	FinishedAt        string        `json:"finished_at"`
	ProviderRequestID string        `json:"provider_request_id,omitempty"`
}

// FormatTime writes t the contract's way.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

// Marshal encodes an attempt as v1 JSON. It does not validate; Validate
// does. It always writes schema SchemaV1, whatever a.Schema holds: the
// layout it writes is v1's, so an attempt decoded from a newer layout is
// written back as a v1 event that decodes to the same attempt.
func Marshal(a *Attempt) ([]byte, error) {
	return json.Marshal(wireAttempt{
		Schema:            SchemaV1,
		EventID:           a.EventID,
		RequestID:         a.RequestID,
		SessionID:         a.SessionID,
		Attempt:           a.Attempt,
		Outcome:           a.Outcome,
		Final:             a.Final,
		Provider:          a.Provider,
		Model:             a.Model,
		Usage:             a.Usage,
		Error:             a.Error,
		StartedAt:         FormatTime(a.StartedAt),
		FinishedAt:        FormatTime(a.FinishedAt),
		ProviderRequestID: a.ProviderRequestID,
	})
}
