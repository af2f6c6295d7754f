package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/projection"
)

// LedgerRequest is what the ledger holds of a request: whether it has a
// record, the session the request belongs to and the highest attempt
// number its record holds.
type LedgerRequest struct {
	Found          bool
	SessionID      string
	HighestAttempt int
}

// RequestLedger looks requests up in the ledger, for the requests whose
// attempt numbers the gateway no longer keeps.
type RequestLedger interface {
	// Lookup returns the ledger's record of requestID (Found false when
	// it has none), or an error wrapping ErrAttemptsUnknown when it holds
	// a record that does not say the request's session and highest
	// attempt.
	Lookup(ctx context.Context, requestID string) (LedgerRequest, error)
}

// KVLedger is the RequestLedger of the ledger's bucket of request
// records (names.RequestsBucket), read from the record's log, which holds
// one entry per attempt number, sorted. While the bucket does not exist
// (no aggregator ever ran, so the ledger holds no request), it knows no
// request, and looks for the bucket again at most every
// ledgerBindInterval.
type KVLedger struct {
	js  jetstream.JetStream
	now func() time.Time

	mu      sync.Mutex
	kv      jetstream.KeyValue // bound on first use
	retryAt time.Time          // of the bind, while the bucket is missing
}

// ledgerBindInterval is how often KVLedger looks for a missing bucket.
const ledgerBindInterval = 5 * time.Second

// NewKVLedger returns the RequestLedger of the ledger on js.
func NewKVLedger(js jetstream.JetStream) *KVLedger { return &KVLedger{js: js, now: time.Now} }

// bucket binds the requests bucket; nil while it does not exist.
func (l *KVLedger) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.kv != nil {
		return l.kv, nil
	}
	if now := l.now(); now.Before(l.retryAt) {
		return nil, nil
	}
	kv, err := l.js.KeyValue(ctx, names.RequestsBucket)
	switch {
	case errors.Is(err, jetstream.ErrBucketNotFound):
		l.retryAt = l.now().Add(ledgerBindInterval)
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("the ledger's %s: %w", names.RequestsBucket, err)
	}
	l.kv = kv
	return kv, nil
}

// Lookup implements RequestLedger.
func (l *KVLedger) Lookup(ctx context.Context, requestID string) (LedgerRequest, error) {
	kv, err := l.bucket(ctx)
	if err != nil || kv == nil {
		return LedgerRequest{}, err
	}
	e, err := kv.Get(ctx, requestID)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return LedgerRequest{}, nil
	case err != nil:
		return LedgerRequest{}, fmt.Errorf("the ledger's record of %s: %w", requestID, err)
	}
	return ledgerRequest(requestID, e.Value())
}

// ledgerRequest reads a stored request record.
func ledgerRequest(requestID string, v []byte) (LedgerRequest, error) {
	var rec projection.Request
	if err := json.Unmarshal(v, &rec); err != nil {
		return LedgerRequest{}, fmt.Errorf("%w: the ledger's record of %s cannot be read (%v); use a new request ID", ErrAttemptsUnknown, requestID, err)
	}
	if rec.SessionID == "" || len(rec.Log) == 0 {
		return LedgerRequest{}, fmt.Errorf("%w: the ledger's record of %s holds no attempts; use a new request ID", ErrAttemptsUnknown, requestID)
	}
	hi := 0
	for _, e := range rec.Log {
		hi = max(hi, e.Attempt)
	}
	return LedgerRequest{Found: true, SessionID: rec.SessionID, HighestAttempt: hi}, nil
}
