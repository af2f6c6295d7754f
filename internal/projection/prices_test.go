package projection

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/pricebook"
	"github.com/agentledger/ledger/internal/pricing"
	"github.com/agentledger/ledger/internal/topology"
)

// priceFile is a user's catalog with round prices, so that costs can be
// worked out by hand: model-a at $1 in / $2 out per million tokens,
// model-b at $10 / $20.
func priceFile(aIn, aOut string) []byte {
	return []byte(`{"entries": [
 {"provider": "anthropic", "model": "model-a", "effective_from": "2026-01-01", "input": "` + aIn + `", "output": "` + aOut + `", "source": "test", "read_on": "2026-11-30"},
 {"provider": "anthropic", "model": "model-b", "effective_from": "2026-01-01", "input": "10", "output": "20", "source": "test", "read_on": "2026-11-30"}
]}`)
}

// loadPrices loads a user's catalog into ledger_prices, as `aggregator
// prices load` does, and returns the catalog.
func (e *env) loadPrices(file []byte) *pricing.Catalog {
	e.t.Helper()
	book, err := pricebook.Open(context.Background(), e.js, topology.Config{}, nil)
	require.NoError(e.t, err)
	cat, err := book.Load(context.Background(), file, "test.json", t0)
	require.NoError(e.t, err)
	return cat
}

// fallbackWires: request r1 tries model-a (billed, failed), falls back to
// model-b (success); request r2 runs on a model without a price.
func fallbackWires(t *testing.T) []wire {
	mk := func(s evSpec, model string) wire {
		a := s.event()
		a.Model = model
		data, err := events.Marshal(a)
		require.NoError(t, err)
		return wire{subject: events.Subject(a.SessionID, a.RequestID), data: data, msgID: a.EventID}
	}
	return []wire{
		mk(evSpec{n: 1, session: "s1", request: "r1", attempt: 0, in: 1000, out: 500}, "model-a"),
		mk(evSpec{n: 2, session: "s1", request: "r1", attempt: 1, success: true, in: 1000, out: 500}, "model-b"),
		mk(evSpec{n: 3, session: "s1", request: "r2", attempt: 0, success: true, in: 300, out: 40}, "model-unpriced"),
	}
}

// A fallback call is priced per attempt, each at its own model's price
// (not the record's model), and an attempt on a model without a price is
// counted as unpriced tokens, never as $0.
func TestFallbackPricedPerAttempt(t *testing.T) {
	e := newEnv(t)
	e.loadPrices(priceFile("1", "2"))
	ws := fallbackWires(t)
	e.publish(ws...)
	obs := &changeRecorder{}
	e.start(Config{Observer: obs, BatchSize: 1})
	e.waitCheckpoint(e.lastSeq())
	reqs, sess := e.ledger()

	// By hand: attempt 0 on model-a: 1000 × $1/M + 500 × $2/M = $0.002;
	// attempt 1 on model-b: 1000 × $10/M + 500 × $20/M = $0.02.
	r1 := reqs["r1"]
	require.Equal(t, pricing.Money(20_000_000), r1.UsageCost, "usage: the winning attempt on model-b")
	require.Equal(t, pricing.Money(22_000_000), r1.BilledCost, "billed: model-a's attempt at model-a's price plus model-b's")
	require.Zero(t, r1.UnpricedBilledTokens)
	r2 := reqs["r2"]
	require.Zero(t, r2.UsageCost)
	require.Zero(t, r2.BilledCost)
	require.Equal(t, int64(340), r2.UnpricedUsageTokens, "an unpriced attempt is never $0: its tokens are counted")
	require.Equal(t, int64(340), r2.UnpricedBilledTokens)
	s1 := sess["s1"]
	require.Equal(t, pricing.Money(20_000_000), s1.UsageCost)
	require.Equal(t, pricing.Money(22_000_000), s1.BilledCost)
	require.Equal(t, int64(340), s1.UnpricedBilledTokens)
	require.Equal(t, int64(340), s1.UnpricedUsageTokens)

	// The metrics' view (ChangeObserver): each committed batch's records
	// before and after, with the error kind of a failed attempt it added.
	obs.mu.Lock()
	defer obs.mu.Unlock()
	require.Equal(t, []string{
		"r1: [] -> [0:error:timeout]",
		"r1: [0:error:] -> [0:error: 1:success:]",
		"r2: [] -> [0:success:]",
	}, obs.got)
}

// changeRecorder is an Observer that writes down what RequestsCommitted
// reports: each record's attempts before and after, with their outcome
// and the error kind the change knows.
type changeRecorder struct {
	mu  sync.Mutex
	got []string
}

func (c *changeRecorder) BatchCommitted(int, time.Duration) {}
func (c *changeRecorder) Rejected(string)                   {}
func (c *changeRecorder) RequestsCommitted(cs Changes) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range cs.Len() {
		ch := cs.At(i)
		log := func(r *Request) string {
			var parts []string
			for j := range r.Log {
				e := &r.Log[j]
				k := ""
				if r == ch.Now() {
					k = string(ch.ErrorKind(e))
				}
				parts = append(parts, fmt.Sprintf("%d:%s:%s", e.Attempt, e.Outcome, k))
			}
			return "[" + strings.Join(parts, " ") + "]"
		}
		was := "[]"
		if ch.Was() != nil {
			was = log(ch.Was())
		}
		c.got = append(c.got, ch.Now().RequestID+": "+was+" -> "+log(ch.Now()))
	}
}

// Two aggregators never price one ledger with two catalog versions: the
// ledger records the version it prices with; a standby that takes over
// after a crash prices with that version even though a newer catalog was
// loaded meanwhile; and a build with another default catalog (one that
// prices model-x in the past, a correction) prices with the recorded
// version too, loaded resolved from ledger_prices (before, it could not
// rebuild that version from the file and its own default, and refused to
// start: pricebook.ErrUnavailable).
func TestTwoCatalogVersionsNeverMix(t *testing.T) {
	e := newEnv(t)
	v1 := e.loadPrices(priceFile("1", "2"))
	ws := genWorkload(t, rand.New(rand.NewPCG(5, 5)), 4, 60)
	for i := range ws {
		ws[i] = withModel(t, ws[i], []string{"model-a", "model-b", "model-x"})
	}
	half := len(ws) / 2
	e.publish(ws[:half]...)
	var once sync.Once
	a := e.start(Config{InstanceID: "a", BatchSize: 7, Faults: func(p FaultPoint) error {
		var err error
		if p == FaultBetweenBuckets {
			once.Do(func() { err = errors.New("injected crash between the buckets") })
		}
		return err
	}})
	require.Error(t, a.waitStopped(t), "a crashes mid-batch")

	// The operator fixes model-a's price while the ledger is half written.
	v2 := e.loadPrices(priceFile("3", "4"))
	require.NotEqual(t, v1.Version(), v2.Version())

	// A build with other default prices writes with v1 too.
	other, err := pricing.Parse([]byte(`{"entries": [{"provider": "anthropic", "model": "model-x", "effective_from": "2026-01-01",
 "input": "7", "output": "7", "source": "test", "read_on": "2026-11-30"}]}`))
	require.NoError(t, err)
	quarter := half + (len(ws)-half)/2
	c := e.start(Config{InstanceID: "c", BatchSize: 5, Catalog: pricing.Default().Merge(other)})
	e.publish(ws[half:quarter]...)
	e.waitCheckpoint(e.lastSeq())
	got, err := LedgerPrices(context.Background(), e.js)
	require.NoError(t, err)
	require.Equal(t, v1.Version(), got, "the other build keeps the recorded version")
	require.NoError(t, c.stop(t))

	b := e.start(Config{InstanceID: "b", BatchSize: 11})
	e.publish(ws[quarter:]...)
	e.waitCheckpoint(e.lastSeq())
	require.True(t, b.agg.Leading())
	e.requireLedger(buildModelPriced(wireStored(ws), v1))
	got, err = LedgerPrices(context.Background(), e.js)
	require.NoError(t, err)
	require.Equal(t, v1.Version(), got, "the ledger keeps the version it recorded")
}

// withModel returns w with its event's model replaced by one of models,
// chosen by its request and attempt (so that copies of one event stay
// alike, and fallbacks change model).
func withModel(t *testing.T, w wire, models []string) wire {
	t.Helper()
	ev, err := events.Decode(w.data)
	if err != nil {
		return w // an invalid message of the workload stays as it is
	}
	ev.Model = models[(len(ev.RequestID)+int(ev.RequestID[len(ev.RequestID)-1])+ev.Attempt)%len(models)]
	data, err := events.Marshal(ev)
	require.NoError(t, err)
	w.data = data
	return w
}

// A catalog that only adds a new model and a future price, each from
// after the latest attempt the ledger priced (the workload's attempts
// start on 2026-11-30), is adopted when the next lease term begins (here:
// a standby taking over), and the ledger is the same as if it had been
// priced with it from the start.
func TestForwardOnlyCatalogAdoptedAtNextTerm(t *testing.T) {
	e := newEnv(t)
	e.loadPrices(priceFile("1", "2"))
	ws := genWorkload(t, rand.New(rand.NewPCG(6, 6)), 3, 40)
	for i := range ws {
		ws[i] = withModel(t, ws[i], []string{"model-a", "model-b", "model-c"})
	}
	half := len(ws) / 2
	e.publish(ws[:half]...)
	a := e.start(Config{InstanceID: "a", BatchSize: 5})
	e.waitCheckpoint(e.lastSeq())
	require.NoError(t, a.stop(t))

	next := e.loadPrices([]byte(`{"entries": [
 {"provider": "anthropic", "model": "model-a", "effective_from": "2026-01-01", "input": "1", "output": "2", "source": "test", "read_on": "2026-11-30"},
 {"provider": "anthropic", "model": "model-a", "effective_from": "2100-01-01", "input": "9", "output": "9", "source": "test", "read_on": "2026-11-30"},
 {"provider": "anthropic", "model": "model-b", "effective_from": "2026-01-01", "input": "10", "output": "20", "source": "test", "read_on": "2026-11-30"},
 {"provider": "anthropic", "model": "model-z", "effective_from": "2026-12-01", "input": "4", "output": "4", "source": "test", "read_on": "2026-11-30"}
]}`))
	e.start(Config{InstanceID: "b", BatchSize: 7})
	e.publish(ws[half:]...)
	e.waitCheckpoint(e.lastSeq())
	got, err := LedgerPrices(context.Background(), e.js)
	require.NoError(t, err)
	require.Equal(t, next.Version(), got, "a forward-only change is adopted")
	e.requireLedger(buildModelPriced(wireStored(ws), next))
}
