package gateway

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/topology"
)

func kvAttempts(t *testing.T) *KVAttempts {
	t.Helper()
	_, _, js := natstest.StartJS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := topology.EnsureGatewayAttempts(ctx, js, topology.Config{}, time.Hour)
	require.NoError(t, err)
	return NewKVAttempts(kv, nil)
}

// Both stores: reservations of one request are disjoint runs, unused
// numbers come back when no reservation followed, and the contract's
// largest attempt number is never passed.
func TestAttemptNumbers(t *testing.T) {
	for name, store := range map[string]AttemptNumbers{"memory": NewMemoryAttempts(), "kv": kvAttempts(t)} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			a, err := store.Reserve(ctx, "req-1", "s", 3)
			require.NoError(t, err)
			assert.Equal(t, 0, a.First)
			b, err := store.Reserve(ctx, "req-1", "s", 3)
			require.NoError(t, err)
			assert.Equal(t, 3, b.First)
			require.NoError(t, store.Release(ctx, "req-1", a, 1), "a was followed by b: nothing comes back")
			require.NoError(t, store.Release(ctx, "req-1", b, 1))
			c, err := store.Reserve(ctx, "req-1", "s", 3)
			require.NoError(t, err)
			assert.Equal(t, 4, c.First, "b's unused numbers came back")

			other, err := store.Reserve(ctx, "req-2", "s", 3)
			require.NoError(t, err)
			assert.Equal(t, 0, other.First, "requests are numbered apart")

			_, err = store.Reserve(ctx, "req-huge", "s", events.MaxAttempt+2)
			require.ErrorIs(t, err, ErrAttemptsExhausted)
			last, err := store.Reserve(ctx, "req-full", "s", events.MaxAttempt+1)
			require.NoError(t, err)
			assert.Equal(t, 0, last.First)
			_, err = store.Reserve(ctx, "req-full", "s", 1)
			require.ErrorIs(t, err, ErrAttemptsExhausted)
		})
	}
}

// Concurrent reservations of one request, as from several replicas, never
// overlap.
func TestKVAttemptsConcurrent(t *testing.T) {
	store := kvAttempts(t)
	other := NewKVAttempts(store.kv, nil) // a second replica's view of the bucket
	const n = 40
	firsts := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			s := store
			if i%2 == 1 {
				s = other
			}
			r, err := s.Reserve(context.Background(), "req-shared", "s", 3)
			if assert.NoError(t, err) {
				firsts[i] = r.First
			}
		})
	}
	wg.Wait()
	sort.Ints(firsts)
	for i, f := range firsts {
		assert.Equal(t, 3*i, f, "reservation %d", i)
	}
}

// Two gateway replicas sharing the bucket: a client that retries the same
// request on either continues one numbering.
func TestReplicasShareTheNumbering(t *testing.T) {
	store := kvAttempts(t)
	up := startScripted(t, reply(500, overloaded))
	withStore := func(c *Config) { c.Attempts = store }
	a := newHarness(t, up.srv.URL, withStore)
	b := newHarness(t, up.srv.URL, withStore)
	for _, h := range []*harness{a, b, a} {
		resp := h.post("/v1/messages", anthropicBody, "X-Api-Key", "k", HeaderRequestID, "r-replicated")
		assert.Equal(t, 500, resp.StatusCode)
	}
	var numbers []int
	for _, ev := range append(a.events(), b.events()...) {
		numbers = append(numbers, ev.Attempt)
	}
	sort.Ints(numbers)
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7, 8}, numbers)
}

// A request that used up its attempt numbers is refused with 409, and one
// whose numbers cannot be reserved with 503: never an attempt that might
// share a number.
func TestReservationRefusals(t *testing.T) {
	up := startScripted(t, reply(200, anthropicOK))
	store := NewMemoryAttempts()
	_, err := store.Reserve(context.Background(), "r-used", DefaultSession, events.MaxAttempt)
	require.NoError(t, err)
	h := newHarness(t, up.srv.URL, func(c *Config) { c.Attempts = store })
	resp := h.post("/v1/messages", anthropicBody, HeaderRequestID, "r-used")
	assert.Equal(t, 409, resp.StatusCode)
	assert.Equal(t, "attempts_exhausted", resp.Header.Get(HeaderGatewayError))

	h2 := newHarness(t, up.srv.URL, func(c *Config) { c.Attempts = unreachable{} })
	resp = h2.post("/v1/messages", anthropicBody, HeaderRequestID, "r-any")
	assert.Equal(t, 503, resp.StatusCode)
	assert.Equal(t, "ledger_unavailable", resp.Header.Get(HeaderGatewayError))
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	assert.Empty(t, up.requests())
	assert.Empty(t, h.events())
	assert.Empty(t, h2.events())

	// A request the client did not name needs no reservation.
	resp = h2.post("/v1/messages", anthropicBody)
	assert.Equal(t, 200, resp.StatusCode)
}

// unreachable is a store that cannot be reached.
type unreachable struct{}

func (unreachable) Reserve(context.Context, string, string, int) (Reservation, error) {
	return Reservation{}, errors.New("nats: no servers available for connection")
}

func (unreachable) Release(context.Context, string, Reservation, int) error { return nil }
