package fleet

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/natstest"
	_ "github.com/agentledger/ledger/internal/provider/anthropic"
	"github.com/agentledger/ledger/internal/retry"
	"github.com/agentledger/ledger/internal/tokenbucket"
)

// The retry budget holds for the fleet: processes that each fail every
// attempt retry, all together, no more than the budget of all their first
// attempts, where each alone would have taken the whole floor.
func TestRetryBudgetHoldsFleetWide(t *testing.T) {
	srv := natstest.Start(t)
	clk := newTestClock()
	pc := procConfig{
		guards: guard.Config{Budget: guard.Budget{On: true, Ratio: 0.2, Min: 4, Window: time.Minute},
			Breaker: breaker.Config{FailureThreshold: 1000}},
		policy: retry.Policy{MaxRetries: 3, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond, HintCap: time.Hour},
	}
	procs := []*proc{
		startProc(t, srv.URL(), clk, "proc-a", pc),
		startProc(t, srv.URL(), clk, "proc-b", pc),
		startProc(t, srv.URL(), clk, "proc-c", pc),
	}
	const callsPerProc = 20
	var wg sync.WaitGroup
	var provider counter
	for _, p := range procs {
		wg.Go(func() {
			for range callsPerProc {
				_ = p.call(provider.wrap(fail503))
			}
		})
	}
	wg.Wait()
	var first, retries, budgetStops int
	for _, p := range procs {
		for _, ev := range p.sink.Events() {
			if ev.Attempt == 0 {
				first++
			} else {
				retries++
			}
			if ev.Final && ev.Error != nil && ev.Error.Retryable && ev.Attempt < 3 {
				budgetStops++
				assert.Contains(t, ev.Error.Message, "not retried: fleet retry budget of "+upstreamKey+" spent")
			}
		}
	}
	require.Equal(t, 3*callsPerProc, first)
	assert.Equal(t, int64(first+retries), provider.n.Load())
	limit := int(0.2*float64(first)) + 4 // 16
	assert.LessOrEqual(t, retries, limit, "the fleet's retries stay within 20 %% of its first attempts plus the floor")
	assert.GreaterOrEqual(t, retries, 4, "the floor was used")
	assert.Positive(t, budgetStops)
	t.Logf("%d first attempts, %d retries (budget %d; one process alone would allow %d)", first, retries, limit, int(0.2*callsPerProc)+4)
}

// A 429 with a retry-after seen by one process holds every process until
// then; the others wait (no attempt, no event) rather than discover it.
func TestHoldAfter429ReachesEveryProcess(t *testing.T) {
	srv := natstest.Start(t)
	clk := newTestClock()
	pc := procConfig{guards: guard.Config{RateLimits: true}}
	a := startProc(t, srv.URL(), clk, "proc-a", pc)
	b := startProc(t, srv.URL(), clk, "proc-b", pc)
	err := a.call(func() error { return &statusError{status: 429, header: map[string]string{"Retry-After": "30"}} })
	require.Error(t, err)
	held := clk.Now().Add(30 * time.Second)
	eventually(t, "b sees the hold", func() bool {
		_, wait, lerr := b.guard().Reserve()
		return wait > 0 && lerr != nil && lerr.Hold
	})
	_, wait, lerr := b.guard().Reserve()
	assert.Equal(t, held.Sub(clk.Now()), wait)
	assert.True(t, lerr.Fleet)
	assert.Equal(t, "fleet hold of "+upstreamKey+" until "+held.UTC().Format(time.RFC3339Nano)+" (429 with retry-after 30s, seen by proc-a)", lerr.Error())

	var provider counter
	require.NoError(t, b.call(provider.wrap(succeed)))
	assert.Equal(t, int64(1), provider.n.Load())
	assert.Equal(t, uint64(1), b.mw.Stats().Waits)
	assert.Len(t, b.sink.Events(), 1, "the wait published nothing")
	assert.False(t, clk.Now().Before(held), "b's attempt went after the hold")

	// A caller whose deadline comes first is rejected with rate_limit,
	// status 0, naming the fleet's hold.
	err = a.call(func() error { return &statusError{status: 429, header: map[string]string{"Retry-After": "30"}} })
	require.Error(t, err)
	eventually(t, "b sees the second hold", func() bool { _, w, lerr := b.guard().Reserve(); return w > 0 && lerr.Hold })
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = retry.Do(ctx, b.mw, testCall, func(context.Context, retry.Attempt) (int, retry.Report, error) {
		return 0, retry.Report{}, errors.New("not called")
	})
	require.ErrorIs(t, err, retry.ErrRateLimited)
	evs := b.sink.Events()
	last := evs[len(evs)-1]
	assert.Equal(t, events.KindRateLimit, last.Error.Kind)
	assert.Equal(t, 0, last.Error.Status)
	assert.Contains(t, last.Error.Message, "fleet hold of "+upstreamKey)
	assert.Contains(t, last.Error.Message, "past the caller's deadline")
}

// guard returns p's guard of the test upstream.
func (p *proc) guard() *guard.Guard {
	return p.mw.Guards().Get(upstreamKey)
}

// rateHeader is an Anthropic response header with a requests limit (the
// middleware reads it: testCall's provider, anthropic, registers its
// rate-limit headers when its package is initialised).
func rateHeader(rpm int) http.Header {
	h := http.Header{}
	h.Set("Anthropic-Ratelimit-Requests-Limit", strconv.Itoa(rpm))
	return h
}

// The limits one process learns from the headers reach the others, and
// the fleet's capacity is one bucket: two processes together take no more
// than it holds.
func TestCapacitySharedByTheFleet(t *testing.T) {
	srv := natstest.Start(t)
	clk := newTestClock()
	pc := procConfig{guards: guard.Config{RateLimits: true}}
	a := startProc(t, srv.URL(), clk, "proc-a", pc)
	b := startProc(t, srv.URL(), clk, "proc-b", pc)
	// a learns 1,200/min: a bucket of 20 requests, 20 a second.
	_, err := retry.Do(context.Background(), a.mw, testCall, func(context.Context, retry.Attempt) (int, retry.Report, error) {
		return 0, retry.Report{Header: rateHeader(1200)}, nil
	})
	require.NoError(t, err)
	eventually(t, "b learns the limit", func() bool {
		u := b.fleet.upstream(upstreamKey)
		u.mu.Lock()
		defer u.mu.Unlock()
		return u.lim.ok && u.lim.rec.Limits[guard.Requests] == 1200
	})
	taken := 0
	for i := range 40 {
		p := a
		if i%2 == 1 {
			p = b
		}
		res, wait, _ := p.guard().Reserve()
		if wait > 0 {
			continue
		}
		taken++
		p.guard().Settle(&res, guard.Outcome{Made: true, Success: true})
	}
	assert.Equal(t, 20, taken, "the two processes took the fleet's one bucket of 20")
	clk.Advance(500 * time.Millisecond)
	taken = 0
	for range 20 {
		if _, wait, _ := b.guard().Reserve(); wait == 0 {
			taken++
		}
	}
	assert.Equal(t, 10, taken, "half a second refills 10")
}

// A process takes capacity in chunks sized to its demand: many calls, few
// writes.
func TestCapacityTakenInChunks(t *testing.T) {
	srv := natstest.Start(t)
	clk := newTestClock()
	pc := procConfig{guards: guard.Config{RateLimits: true, Limits: map[string]guard.Limits{upstreamKey: {guard.Requests: 60000}}}}
	a := startProc(t, srv.URL(), clk, "proc-a", pc)
	before := a.fleet.Stats().Writes
	const calls = 400
	for range calls {
		res, wait, lerr := a.guard().Reserve()
		require.Zero(t, wait, "%v", lerr)
		a.guard().Settle(&res, guard.Outcome{Made: true, Success: true})
		clk.Advance(2 * time.Millisecond) // 500 calls a second
	}
	writes := a.fleet.Stats().Writes - before
	t.Logf("%d calls took capacity in %d writes", calls, writes)
	assert.Less(t, writes, uint64(calls/5), "at most one write per five calls")
}

// The fleet's buckets hold no more than the provider last said remained
// (refilled since): what they missed, such as the attempts of processes
// that decided alone for a while, the provider counted.
func TestRefillCappedByWhatTheProviderSaid(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lim := guard.Limits{guard.Requests: 600} // a bucket of 10, 10 a second
	cur := capacityRecord{V: recordVersion, At: now.Add(-time.Minute), Est: dimsOf[float64]{1, 900}}
	var seen remainingSeen
	next := refill(cur, true, lim, time.Second, now, &seen)
	assert.Equal(t, 10.0, next.Levels[guard.Requests], "full after a minute")
	assert.Equal(t, cur.Est, next.Est, "the estimate carries over")
	seen.at[guard.Requests] = tokenbucket.Bucket{Level: 2, At: now.Add(-100 * time.Millisecond)}
	seen.valid[guard.Requests] = true
	next = refill(cur, true, lim, time.Second, now, &seen)
	assert.InDelta(t, 3.0, next.Levels[guard.Requests], 1e-9, "2 said remaining 100 ms ago, plus 1 refilled")
}

// A process whose own attempts have not yet told it their cost reserves
// the estimate another process wrote with the capacity it took.
func TestEstimateSharedByTheFleet(t *testing.T) {
	srv := natstest.Start(t)
	clk := newTestClock()
	pc := procConfig{guards: guard.Config{RateLimits: true, Limits: map[string]guard.Limits{upstreamKey: {guard.InputTokens: 600000}}}}
	a := startProc(t, srv.URL(), clk, "proc-a", pc)
	b := startProc(t, srv.URL(), clk, "proc-b", pc)
	_, known := b.fleet.upstream(upstreamKey).Estimate()
	require.False(t, known)
	for range 2 { // the second takes capacity, writing a's estimate
		res, wait, lerr := a.guard().Reserve()
		require.Zero(t, wait, "%v", lerr)
		a.guard().Settle(&res, guard.Outcome{Made: true, Success: true, Usage: events.Usage{InputTokens: 800, OutputTokens: 100}})
	}
	var est guard.Cost
	eventually(t, "b sees a's estimate", func() bool {
		est, known = b.fleet.upstream(upstreamKey).Estimate()
		return known
	})
	assert.Equal(t, guard.Cost{guard.Requests: 1, guard.InputTokens: 800, guard.OutputTokens: 100, guard.Tokens: 900}, est)
}
