package events

import (
	"time"

	"github.com/agentledger/ledger/api"
)

// SchemaV1 is the value of the "schema" field of a v1 attempt event.
const SchemaV1 = "ledger.attempt.v1"

// Outcome is how one attempt ended.
type Outcome string

// Outcomes of an attempt.
const (
	OutcomeSuccess Outcome = "success"
	OutcomeError   Outcome = "error"
)

// ErrorKind classifies why an attempt failed; it is the public API's
// type (api.ErrorKind), the same for the ledger and its users.
type ErrorKind = api.ErrorKind

// Error kinds of wire contract v1.
const (
	KindRateLimit   = api.KindRateLimit
	KindOverloaded  = api.KindOverloaded
	KindTimeout     = api.KindTimeout
	KindConnection  = api.KindConnection
	KindServer      = api.KindServer
	KindClient      = api.KindClient
	KindAuth        = api.KindAuth
	KindQuota       = api.KindQuota
	KindCanceled    = api.KindCanceled
	KindCircuitOpen = api.KindCircuitOpen
	KindOther       = api.KindOther
)

// Limits of wire contract v1.
const (
	MaxAttempt        = api.MaxAttempt
	MaxTokens         = 1_000_000_000_000
	MaxMessageBytes   = 1024
	MaxIDLength       = 128
	MaxProviderLength = 64
	MaxModelLength    = 256
	MaxProviderReqID  = 256
	// MaxServiceTierLength bounds service_tier, in bytes.
	MaxServiceTierLength = 32

	// MaxEventBytes is the largest event body the contract allows (64
	// KiB), unknown members and white space included: a valid event as
	// Marshal writes it takes at most about three eighths of it (23 KiB
	// with every string at its longest and most escaped, 16 labels
	// included; TestLargestValidEventFits). A larger body is rejected as
	// too_large.
	MaxEventBytes = 64 << 10
	// MaxEventHeaderBytes is the room beside the body for the headers of
	// a message on LEDGER_ATTEMPTS (Nats-Msg-Id and any of the
	// publisher's own).
	MaxEventHeaderBytes = 4 << 10
	// MaxEventMsgBytes is the largest message LEDGER_ATTEMPTS stores,
	// headers and body: its MaxMsgSize.
	MaxEventMsgBytes = MaxEventBytes + MaxEventHeaderBytes
)

// Usage is what the provider billed for one attempt, in tokens; it is the
// public API's type (api.Usage).
type Usage = api.Usage

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
	// ServiceTier is the tier the provider says served the attempt
	// ("standard", "priority", "flex", "batch", ...), "" when it did not
	// say. It prices the attempt; it is not part of Usage.
	ServiceTier string `json:"service_tier,omitempty"`
	// EstimatedInputTokens is the input a tokenizer estimated for an
	// attempt whose provider never reported its input (an OpenAI stream
	// cut before its usage chunk); 0 when nothing was estimated. It is
	// kept apart from Usage so that exact and estimated counts never mix.
	EstimatedInputTokens int64 `json:"estimated_input_tokens,omitempty"`
	// Labels attribute the call (issue 20); nil when it has none. The
	// request's labels are those of its first accepted attempt.
	Labels api.Labels `json:"labels,omitempty"`
}
