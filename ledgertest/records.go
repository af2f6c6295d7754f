package ledgertest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/projection"
)

// Request statuses.
const (
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusPending   = "pending"
)

// Request is the ledger's record of one logical call (bucket
// ledger_requests, wire contract v1).
type Request struct {
	RequestID string
	SessionID string
	Provider  string
	Model     string
	// Status is StatusSucceeded, StatusFailed or StatusPending (no final
	// event yet).
	Status string
	// Attempts is the number of attempts recorded.
	Attempts int
	// WinningAttempt is the number of the successful attempt (-1 when
	// none).
	WinningAttempt int
	// Usage is what the call used: its winning attempt's usage.
	Usage ledger.Usage
	// Billed is what the provider charged: the sum over every attempt.
	Billed         ledger.Usage
	FirstStartedAt time.Time
	LastFinishedAt time.Time
}

// Session is the ledger's rollup of one session (bucket ledger_sessions).
type Session struct {
	SessionID string
	Requests  int64
	Succeeded int64
	Failed    int64
	Pending   int64
	Attempts  int64
	// Usage and Billed are the sums over the session's requests.
	Usage  ledger.Usage
	Billed ledger.Usage
	// Saturated reports that a sum reached 2^63-1 and stopped there.
	Saturated bool
}

// Request reads the record of requestID; the test fails when there is
// none (wait with WaitCaughtUp first).
func (l *Ledger) Request(t testing.TB, requestID string) Request {
	t.Helper()
	var r projection.Request
	l.read(t, names.RequestsBucket, requestID, &r)
	v := r.View()
	return Request{
		RequestID: v.RequestID, SessionID: v.SessionID, Provider: v.Provider, Model: v.Model,
		Status: v.Status, Attempts: v.Attempts, WinningAttempt: v.WinningAttempt,
		Usage: ledger.Usage(v.Usage), Billed: ledger.Usage(v.Billed),
		FirstStartedAt: v.FirstStartedAt, LastFinishedAt: v.LastFinishedAt,
	}
}

// Session reads the record of sessionID; the test fails when there is
// none.
func (l *Ledger) Session(t testing.TB, sessionID string) Session {
	t.Helper()
	var s projection.Session
	l.read(t, names.SessionsBucket, sessionID, &s)
	v := s.View()
	return Session{
		SessionID: v.SessionID, Requests: v.Requests, Succeeded: v.Succeeded, Failed: v.Failed,
		Pending: v.Pending, Attempts: v.Attempts, Usage: ledger.Usage(v.Usage), Billed: ledger.Usage(v.Billed),
		Saturated: v.Saturated,
	}
}

// read decodes the record key of bucket into dst.
func (l *Ledger) read(t testing.TB, bucket, key string, dst any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := l.js.KeyValue(ctx, bucket)
	if err != nil {
		t.Fatalf("ledgertest: opening %s (is an aggregator running?): %v", bucket, err)
	}
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("ledgertest: %s has no record %q (did WaitCaughtUp run after the call?)", bucket, key)
	}
	if err != nil {
		t.Fatalf("ledgertest: reading %q from %s: %v", key, bucket, err)
	}
	if err := json.Unmarshal(e.Value(), dst); err != nil {
		t.Fatalf("ledgertest: the record %q of %s is not readable: %v", key, bucket, err)
	}
}
