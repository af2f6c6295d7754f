package fakekit

import (
	"context"
	"net/http"
	"strconv"

	"github.com/agentledger/ledger/internal/retry"
)

// Sim is the client side of a dialect: the provider's SDK client the
// simulator drives against the fake provider.
type Sim struct {
	// Model is the model the simulator asks for.
	Model string
	// Order places the provider in the simulator's default round robin of
	// sessions over providers (lower first, then by name): the same seed
	// gives the same sessions to the same providers as long as the set of
	// providers is the same.
	Order int
	// NewCaller builds the SDK client, with its own retries off, for cfg.
	NewCaller func(ctx context.Context, cfg ClientConfig) (Caller, error)
	// Classifier classifies the errors of the SDK.
	Classifier retry.Classifier
}

// ClientConfig is what a simulated SDK client is built with.
type ClientConfig struct {
	// BaseURL is the dialect's base URL on the fake provider.
	BaseURL string
	// APIKey is any credential: the fake provider checks only that the
	// provider's credential header is there.
	APIKey string
	// HTTPClient is the client to send with.
	HTTPClient *http.Client
	// Model is the model to ask for.
	Model string
	// MaxTokens is the output cap of every call.
	MaxTokens int64
}

// Caller makes one attempt of a call with one provider's SDK client. It
// sends the ledger headers of a (LedgerHeaders), and reports what the
// provider billed, on error too. It is safe for concurrent use.
type Caller interface {
	Call(ctx context.Context, prompt string, a retry.Attempt) (retry.Report, error)
}

// LedgerHeaders are the headers naming attempt a, as the fake provider
// reads them.
func LedgerHeaders(a retry.Attempt) http.Header {
	h := http.Header{}
	h.Set(HeaderSessionID, a.SessionID)
	h.Set(HeaderRequestID, a.RequestID)
	h.Set(HeaderAttempt, strconv.Itoa(a.Number))
	return h
}
