package events

import "time"

// SchemaV1 is the value of the "schema" field of a v1 attempt event.
const SchemaV1 = "ledger.attempt.v1"

// Outcome is how one attempt ended.
type Outcome string

// Outcomes of an attempt.
const (
	OutcomeSuccess Outcome = "success"
	OutcomeError   Outcome = "error"
)

// ErrorKind classifies why an attempt failed.
type ErrorKind string

// Error kinds of wire contract v1.
const (
	KindRateLimit   ErrorKind = "rate_limit"
	KindOverloaded  ErrorKind = "overloaded"
	KindTimeout     ErrorKind = "timeout"
	KindConnection  ErrorKind = "connection"
	KindServer      ErrorKind = "server"
	KindClient      ErrorKind = "client"
	KindAuth        ErrorKind = "auth"
	KindQuota       ErrorKind = "quota"
	KindCanceled    ErrorKind = "canceled"
	KindCircuitOpen ErrorKind = "circuit_open"
	KindOther       ErrorKind = "other"
)

// Valid reports whether k is one of the kinds of wire contract v1.
func (k ErrorKind) Valid() bool {
	switch k {
	case KindRateLimit, KindOverloaded, KindTimeout, KindConnection, KindServer,
		KindClient, KindAuth, KindQuota, KindCanceled, KindCircuitOpen, KindOther:
		return true
	}
	return false
}

// Limits of wire contract v1.
const (
	MaxAttempt        = 1000
	MaxTokens         = 1_000_000_000_000
	MaxMessageBytes   = 1024
	MaxIDLength       = 128
	MaxProviderLength = 64
	MaxModelLength    = 256
	MaxProviderReqID  = 256

	// MaxEventBytes is the largest event body the contract allows (64
	// KiB), unknown members and white space included: a valid event as
	// Marshal writes it takes about a sixth of it. A larger body is
	// rejected as too_large.
	MaxEventBytes = 64 << 10
	// MaxEventHeaderBytes is the room beside the body for the headers of
	// a message on LEDGER_ATTEMPTS (Nats-Msg-Id and any of the
	// publisher's own).
	MaxEventHeaderBytes = 4 << 10
	// MaxEventMsgBytes is the largest message LEDGER_ATTEMPTS stores,
	// headers and body: its MaxMsgSize.
	MaxEventMsgBytes = MaxEventBytes + MaxEventHeaderBytes
)

// Usage is what the provider billed for one attempt, in tokens. InputTokens
// counts every input token, cached ones included; the two cache fields are
// subsets of it.
type Usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
}

// Add returns u + v field by field.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:              u.InputTokens + v.InputTokens,
		OutputTokens:             u.OutputTokens + v.OutputTokens,
		CacheReadInputTokens:     u.CacheReadInputTokens + v.CacheReadInputTokens,
		CacheCreationInputTokens: u.CacheCreationInputTokens + v.CacheCreationInputTokens,
	}
}

// Sub returns u - v field by field.
func (u Usage) Sub(v Usage) Usage {
	return Usage{
		InputTokens:              u.InputTokens - v.InputTokens,
		OutputTokens:             u.OutputTokens - v.OutputTokens,
		CacheReadInputTokens:     u.CacheReadInputTokens - v.CacheReadInputTokens,
		CacheCreationInputTokens: u.CacheCreationInputTokens - v.CacheCreationInputTokens,
	}
}

// IsZero reports whether every field is zero.
func (u Usage) IsZero() bool { return u == Usage{} }

// AttemptError describes a failed attempt. It is present on an event if and
// only if the outcome is OutcomeError.
type AttemptError struct {
	Kind      ErrorKind `json:"kind"`
	Status    int       `json:"status"`
	Retryable bool      `json:"retryable"`
	Message   string    `json:"message"`
}

// Attempt is one try of one logical model call: the v1 attempt event.
// Every attempt of a logical call shares RequestID; EventID is unique per
// attempt and doubles as the JetStream Nats-Msg-Id.
type Attempt struct {
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
	StartedAt         time.Time     `json:"started_at"`
	FinishedAt        time.Time     `json:"finished_at"`
	ProviderRequestID string        `json:"provider_request_id,omitempty"`
}
