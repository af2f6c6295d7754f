package ledgertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	Billed ledger.Usage
	// EstimatedInputTokens is the input estimated with a tokenizer for
	// the attempts whose provider never reported it (an OpenAI stream
	// cut before its usage chunk): apart from Usage and Billed, which it
	// is never part of.
	EstimatedInputTokens int64
	// UsageCost is the winning attempt's money and BilledCost every
	// attempt's, each at its own price, in nano-US-dollars (1e-9 USD);
	// the tokens (input and output) of attempts without a price are
	// counted apart, never as $0.
	UsageCost, BilledCost                     int64
	UnpricedUsageTokens, UnpricedBilledTokens int64
	FirstStartedAt                            time.Time
	LastFinishedAt                            time.Time
	// Labels are the request's: those of its first accepted attempt
	// (nil when it has none). LabelConflicts counts its later attempts
	// whose labels differed: their usage counts, their labels do not.
	Labels         ledger.Labels
	LabelConflicts int64
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
	// EstimatedInputTokens is the sum of the requests' estimated input,
	// apart from Usage and Billed.
	EstimatedInputTokens int64
	// UsageCost, BilledCost (nano-USD) and the unpriced tokens are the
	// sums of the requests' (Request).
	UsageCost, BilledCost                     int64
	UnpricedUsageTokens, UnpricedBilledTokens int64
	// Saturated reports that a sum reached 2^63-1 and stopped there.
	Saturated bool
}

// Request reads the record of requestID; the test fails when there is
// none, saying whether the ledger has nothing at all yet or nothing for
// this request (wait with WaitCaughtUp or WaitRequest first;
// LookupRequest reports an absent record without failing).
func (l *Ledger) Request(t testing.TB, requestID string) Request {
	t.Helper()
	return must(t, "request", requestID, l.lookupRequest)
}

// LookupRequest reads the record of requestID, and reports false when the
// ledger has none (a request never written, or a ledger still empty)
// without failing the test. An unreadable record or a broken connection
// fails it.
func (l *Ledger) LookupRequest(t testing.TB, requestID string) (Request, bool) {
	t.Helper()
	r, err := l.lookupRequest(t, requestID)
	return r, err == nil
}

// Session reads the record of sessionID; the test fails when there is
// none (LookupSession reports an absent record without failing).
func (l *Ledger) Session(t testing.TB, sessionID string) Session {
	t.Helper()
	return must(t, "session", sessionID, l.lookupSession)
}

// LookupSession reads the record of sessionID, and reports false when the
// ledger has none, without failing the test.
func (l *Ledger) LookupSession(t testing.TB, sessionID string) (Session, bool) {
	t.Helper()
	s, err := l.lookupSession(t, sessionID)
	return s, err == nil
}

// must returns the record of kind id that lookup finds, and fails the
// test when there is none.
func must[R any](t testing.TB, kind, id string, lookup func(testing.TB, string) (R, error)) R {
	t.Helper()
	r, err := lookup(t, id)
	if err != nil {
		t.Fatalf("ledgertest: %s", absent(err, kind, id))
	}
	return r
}

// WaitRequest flushes the publishers made by Publisher and waits (up to
// 30 s; the test fails after that) until the ledger holds a final record
// of requestID (succeeded or failed), and returns it. It waits for that
// one request, where WaitCaughtUp waits for the whole stream; a call that
// Do returned from has published its final event, so its record becomes
// final once the aggregator applies it.
func (l *Ledger) WaitRequest(t testing.TB, requestID string) Request {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l.flush(ctx, t)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		r, err := l.lookupRequest(t, requestID)
		if err == nil && r.Status != StatusPending {
			return r
		}
		select {
		case <-ctx.Done():
			if err == nil {
				t.Fatalf("ledgertest: the record of request %q is still pending after 30s (%d attempt(s) applied, no final one)", requestID, r.Attempts)
			}
			t.Fatalf("ledgertest: after 30s, %s", absent(err, "request", requestID))
		case <-tick.C:
		}
	}
}

// lookupRequest reads the record of requestID; errEmpty or errNoRecord
// when there is none.
func (l *Ledger) lookupRequest(t testing.TB, requestID string) (Request, error) {
	t.Helper()
	var r projection.Request
	if err := l.lookup(t, names.RequestsBucket, requestID, &r); err != nil {
		return Request{}, err
	}
	v := r.View()
	return Request{
		RequestID: v.RequestID, SessionID: v.SessionID, Provider: v.Provider, Model: v.Model, Status: v.Status,
		Attempts: v.Attempts, WinningAttempt: v.WinningAttempt, Usage: v.Usage, Billed: v.Billed,
		EstimatedInputTokens: v.EstimatedInputTokens,
		UsageCost:            int64(v.UsageCost), BilledCost: int64(v.BilledCost),
		UnpricedUsageTokens: v.UnpricedUsageTokens, UnpricedBilledTokens: v.UnpricedBilledTokens,
		FirstStartedAt: v.FirstStartedAt, LastFinishedAt: v.LastFinishedAt,
		Labels: v.Labels, LabelConflicts: v.LabelConflicts,
	}, nil
}

// lookupSession reads the record of sessionID; errEmpty or errNoRecord
// when there is none.
func (l *Ledger) lookupSession(t testing.TB, sessionID string) (Session, error) {
	t.Helper()
	var s projection.Session
	if err := l.lookup(t, names.SessionsBucket, sessionID, &s); err != nil {
		return Session{}, err
	}
	v := s.View()
	return Session{
		SessionID: v.SessionID, Requests: v.Requests, Succeeded: v.Succeeded, Failed: v.Failed,
		Pending: v.Pending, Attempts: v.Attempts, Usage: v.Usage, Billed: v.Billed,
		EstimatedInputTokens: v.EstimatedInputTokens,
		UsageCost:            int64(v.UsageCost), BilledCost: int64(v.BilledCost),
		UnpricedUsageTokens: v.UnpricedUsageTokens, UnpricedBilledTokens: v.UnpricedBilledTokens,
		Saturated: v.Saturated,
	}, nil
}

// errEmpty and errNoRecord say why lookup found no record.
var (
	errEmpty    = errors.New("nothing has been written to the ledger yet")
	errNoRecord = errors.New("the ledger has no record of it")
)

// absent says why the record of kind id is not in the ledger: the ledger
// has nothing yet (no bucket), or nothing for id.
func absent(why error, kind, id string) string {
	return fmt.Sprintf("no %s %q: %v (did the call publish through l.Publisher, or a publisher connected to l.URL(), "+
		"and did WaitCaughtUp or WaitRequest run after it?)", kind, id, why)
}

// lookup decodes the record key of bucket into dst, and returns errEmpty
// when the bucket does not exist yet or holds nothing, and errNoRecord
// when the key does not exist in a bucket that holds others. The aggregator creates its buckets when it starts working, after
// Start returned; on an empty stream WaitCaughtUp does not wait for that,
// so an empty ledger may have no bucket at all.
func (l *Ledger) lookup(t testing.TB, bucket, key string, dst any) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := l.js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return errEmpty
	}
	if err != nil {
		t.Fatalf("ledgertest: opening %s: %v", bucket, err)
	}
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		// The aggregator may have created its buckets an instant ago:
		// an empty bucket is an empty ledger too, whichever way the
		// race with its start went.
		if st, serr := kv.Status(ctx); serr == nil && st.Values() == 0 {
			return errEmpty
		}
		return errNoRecord
	}
	if err != nil {
		t.Fatalf("ledgertest: reading %q from %s: %v", key, bucket, err)
	}
	if err := json.Unmarshal(e.Value(), dst); err != nil {
		t.Fatalf("ledgertest: the record %q of %s is not readable: %v", key, bucket, err)
	}
	return nil
}
