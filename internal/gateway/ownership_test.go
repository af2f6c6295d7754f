package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/projection"
	"github.com/agentledger/ledger/internal/testkit"
	"github.com/agentledger/ledger/internal/topology"
)

// ledgerRig is a NATS server with the gateway's bucket of attempt numbers
// (expiring after ttl) and the ledger's bucket of request records.
type ledgerRig struct {
	attempts jetstream.KeyValue
	requests jetstream.KeyValue
	store    *KVAttempts
}

func newLedgerRig(t *testing.T, ttl time.Duration) *ledgerRig {
	t.Helper()
	_, _, js := natstest.StartJS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	att, err := topology.EnsureGatewayAttempts(ctx, js, topology.Config{}, ttl)
	require.NoError(t, err)
	req, err := topology.EnsureBucket(ctx, js, topology.Config{}, names.RequestsBucket, "test")
	require.NoError(t, err)
	return &ledgerRig{attempts: att, requests: req, store: NewKVAttempts(att, NewKVLedger(js))}
}

// project writes the ledger's record of evs, as the aggregator would.
func (l *ledgerRig) project(t *testing.T, evs []events.Attempt) {
	t.Helper()
	byID := map[string][]events.Attempt{}
	for _, ev := range evs {
		byID[ev.RequestID] = append(byID[ev.RequestID], ev)
	}
	recs := map[string]*projection.Request{}
	for id, evs := range byID {
		recs[id] = foldedRecord(t, evs...)
	}
	for id, r := range recs {
		b, err := json.Marshal(r)
		require.NoError(t, err)
		_, err = l.requests.Put(context.Background(), id, b)
		require.NoError(t, err)
	}
}

// attemptsOf returns the attempt numbers of the events of request id.
func attemptsOf(evs []events.Attempt, id string) []int {
	var out []int
	for _, ev := range evs {
		if ev.RequestID == id {
			out = append(out, ev.Attempt)
		}
	}
	return out
}

// Issue 17 item 4: a request ID that already belongs to another session,
// by the gateway's own record or by the ledger's, is answered 409 before
// any attempt: the upstream sees nothing, no event is published (before,
// both calls got 200, the provider billed both, and the ledger rejected
// the second as session_conflict).
func TestRequestIDOwnedBySession(t *testing.T) {
	rig := newLedgerRig(t, time.Hour)
	for name, store := range map[string]AttemptNumbers{"memory": NewMemoryAttempts(), "kv": rig.store} {
		t.Run(name, func(t *testing.T) {
			up := startScripted(t, reply(200, anthropicOK))
			h := newHarness(t, up.srv.URL, func(c *Config) { c.Attempts = store })
			resp := h.post("/v1/messages", anthropicBody, "X-Api-Key", "k", HeaderSessionID, "sess-a", HeaderRequestID, "r-owned-"+name)
			require.Equal(t, 200, resp.StatusCode)
			resp = h.post("/v1/messages", anthropicBody, "X-Api-Key", "k", HeaderSessionID, "sess-b", HeaderRequestID, "r-owned-"+name)
			assert.Equal(t, 409, resp.StatusCode)
			assert.Equal(t, "request_owned", resp.Header.Get(HeaderGatewayError))
			body, _ := read(resp)
			assert.NotContains(t, body, "sess-a", "the owner is another client's business")
			assert.Len(t, up.requests(), 1, "the upstream saw only the first call")
			assert.Len(t, h.events(), 1)
			assert.Contains(t, h.logs.String(), `"reason":"request_owned"`)

			// The owner's own retry goes on.
			resp = h.post("/v1/messages", anthropicBody, "X-Api-Key", "k", HeaderSessionID, "sess-a", HeaderRequestID, "r-owned-"+name)
			assert.Equal(t, 200, resp.StatusCode)
			assert.Equal(t, []int{0, 1}, attemptsOf(h.events(), "r-owned-"+name))
		})
	}

	t.Run("ledger", func(t *testing.T) {
		// A request the ledger holds (published by an agent, or numbered
		// by a gateway whose record expired) is owned by its session.
		up := startScripted(t, reply(200, anthropicOK))
		h := newHarness(t, up.srv.URL, func(c *Config) { c.Attempts = rig.store })
		rig.project(t, []events.Attempt{attemptEvent("r-in-ledger", "sess-a", 0)})
		resp := h.post("/v1/messages", anthropicBody, "X-Api-Key", "k", HeaderSessionID, "sess-b", HeaderRequestID, "r-in-ledger")
		assert.Equal(t, 409, resp.StatusCode)
		assert.Equal(t, "request_owned", resp.Header.Get(HeaderGatewayError))
		assert.Empty(t, up.requests())
		assert.Empty(t, h.events())
	})
}

// attemptEvent is a valid, billed, failed attempt n of request id.
func attemptEvent(id, session string, n int) events.Attempt {
	t0 := time.Date(2026, 12, 4, 9, 0, n, 0, time.UTC)
	return events.Attempt{
		Schema: events.SchemaV1, EventID: "01KBN00000000000000000000" + string(rune('A'+n)), RequestID: id, SessionID: session,
		Attempt: n, Provider: "anthropic", Model: "claude-test", Outcome: events.OutcomeError,
		Error:     &events.AttemptError{Kind: events.KindServer, Status: 500, Retryable: true, Message: "overloaded"},
		StartedAt: t0, FinishedAt: t0.Add(time.Second), Usage: usage(10, 0, 0, 0),
	}
}

// Issue 15 item 8: once the gateway's record of a request's numbers has
// expired, a client's retry continues from the highest attempt the
// ledger's record holds, not from 0 again (rule 3 of the contract would
// drop the new attempts' usage as duplicates). A record that cannot say
// refuses the call with 409 rather than reuse a number.
func TestAttemptNumbersAfterTheirRecordExpired(t *testing.T) {
	rig := newLedgerRig(t, time.Second)
	up := startScripted(t, reply(500, overloaded))
	h := newHarness(t, up.srv.URL, func(c *Config) { c.Attempts = rig.store })
	resp := h.post("/v1/messages", anthropicBody, "X-Api-Key", "k", HeaderRequestID, "r-expiring")
	require.Equal(t, 500, resp.StatusCode)
	require.Equal(t, []int{0, 1, 2}, attemptsOf(h.events(), "r-expiring"))
	rig.project(t, h.events())

	require.Eventually(t, func() bool {
		_, err := rig.attempts.Get(context.Background(), "r-expiring")
		return errors.Is(err, jetstream.ErrKeyNotFound)
	}, 20*time.Second, 50*time.Millisecond, "the record of the numbers expires")

	resp = h.post("/v1/messages", anthropicBody, "X-Api-Key", "k", HeaderRequestID, "r-expiring")
	require.Equal(t, 500, resp.StatusCode)
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5}, attemptsOf(h.events(), "r-expiring"), "numbers never repeat")

	// A record the gateway cannot read the attempts of: refused, nothing sent.
	_, err := rig.requests.Put(context.Background(), "r-unknown", []byte(`{"request_id":"r-unknown"}`))
	require.NoError(t, err)
	before := len(up.requests())
	resp = h.post("/v1/messages", anthropicBody, "X-Api-Key", "k", HeaderRequestID, "r-unknown")
	assert.Equal(t, 409, resp.StatusCode)
	assert.Equal(t, "attempts_unknown", resp.Header.Get(HeaderGatewayError))
	assert.Len(t, up.requests(), before)
	assert.Empty(t, attemptsOf(h.events(), "r-unknown"))
}

// A bare number, as a gateway before sessions were kept wrote it, is read
// as the next number, and the request is claimed by the session that
// reserves next.
func TestKVAttemptsReadsBareNumbers(t *testing.T) {
	rig := newLedgerRig(t, time.Hour)
	_, err := rig.attempts.Put(context.Background(), "r-old", []byte("4"))
	require.NoError(t, err)
	res, err := rig.store.Reserve(context.Background(), "r-old", "sess-a", 3)
	require.NoError(t, err)
	assert.Equal(t, 4, res.First)
	_, err = rig.store.Reserve(context.Background(), "r-old", "sess-b", 3)
	require.ErrorIs(t, err, ErrRequestOwned)
	require.NoError(t, rig.store.Release(context.Background(), "r-old", res, 1))
	e, err := rig.attempts.Get(context.Background(), "r-old")
	require.NoError(t, err)
	assert.Equal(t, "5 sess-a", string(e.Value()))
}

// Before the aggregator created the ledger's bucket, the ledger knows no
// request; the bucket is looked for again after ledgerBindInterval.
func TestKVLedgerBeforeTheBucketExists(t *testing.T) {
	_, _, js := natstest.StartJS(t)
	ctx := context.Background()
	clk := testkit.NewClock()
	l := NewKVLedger(js)
	l.now = clk.Now
	got, err := l.Lookup(ctx, "r-1")
	require.NoError(t, err)
	assert.False(t, got.Found)

	kv, err := topology.EnsureBucket(ctx, js, topology.Config{}, names.RequestsBucket, "test")
	require.NoError(t, err)
	rec, err := json.Marshal(foldedRecord(t, attemptEvent("r-1", "sess-a", 0), attemptEvent("r-1", "sess-a", 4)))
	require.NoError(t, err)
	_, err = kv.Put(ctx, "r-1", rec)
	require.NoError(t, err)
	got, err = l.Lookup(ctx, "r-1")
	require.NoError(t, err)
	assert.False(t, got.Found, "not looked for again yet")
	clk.Advance(ledgerBindInterval)
	got, err = l.Lookup(ctx, "r-1")
	require.NoError(t, err)
	assert.Equal(t, LedgerRequest{Found: true, SessionID: "sess-a", HighestAttempt: 4}, got)
}

// foldedRecord is the record the aggregator makes of evs, all of one
// request.
func foldedRecord(t *testing.T, evs ...events.Attempt) *projection.Request {
	t.Helper()
	r := projection.NewRequest(evs[0].RequestID, evs[0].SessionID)
	for i := range evs {
		ok, _ := projection.Fold(r, &evs[i], nil)
		require.True(t, ok)
	}
	return r
}
