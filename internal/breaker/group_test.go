package breaker_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/testkit"
)

func TestGroupGet(t *testing.T) {
	clk := testkit.NewClock()
	g, err := breaker.NewGroup(breaker.Config{FailureThreshold: 1, Cooldown: testCooldown, Now: clk.Now})
	require.NoError(t, err)

	a := g.Get("anthropic/claude-sonnet")
	require.NotNil(t, a)
	assert.Same(t, a, g.Get("anthropic/claude-sonnet"))
	assert.Equal(t, "anthropic/claude-sonnet", a.Key())
	o := g.Get("openai/gpt-5")
	assert.NotSame(t, a, o)
	assert.Equal(t, "openai/gpt-5", o.Key())

	// The breakers share the config but not their state.
	call(t, a, breaker.Failure)
	assert.Equal(t, breaker.Open, a.State(), "the group's threshold applies")
	assert.Equal(t, breaker.Closed, o.State())
	admit(t, o)
	assert.Equal(t, clk.Now().Add(testCooldown), reject(t, g.Get("anthropic/claude-sonnet")).Until,
		"the group's clock and cooldown apply")
}

func TestGroupGetConcurrent(t *testing.T) {
	g, err := breaker.NewGroup(breaker.Config{})
	require.NoError(t, err)

	const (
		goroutines = 32
		keys       = 16
	)
	got := make([][keys]*breaker.Breaker, goroutines)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for k := range keys {
				// Each goroutine walks the keys from a different offset so
				// that first uses collide.
				key := (k + i) % keys
				got[i][key] = g.Get(fmt.Sprint("provider/model-", key))
			}
		}()
	}
	close(start)
	wg.Wait()

	distinct := map[*breaker.Breaker]bool{}
	for k := range keys {
		want := got[0][k]
		require.NotNil(t, want)
		assert.Equal(t, fmt.Sprint("provider/model-", k), want.Key())
		for i := range goroutines {
			assert.Same(t, want, got[i][k], "goroutine %d, key %d", i, k)
		}
		distinct[want] = true
	}
	assert.Len(t, distinct, keys, "one breaker per key")
}

func TestGroupOnStateChangeKey(t *testing.T) {
	var (
		mu   sync.Mutex
		keys []string
	)
	g, err := breaker.NewGroup(breaker.Config{
		FailureThreshold: 1,
		Now:              testkit.NewClock().Now,
		OnStateChange: func(key string, from, to breaker.State) {
			mu.Lock()
			defer mu.Unlock()
			keys = append(keys, fmt.Sprintf("%s %v->%v", key, from, to))
		},
	})
	require.NoError(t, err)

	call(t, g.Get("b"), breaker.Failure)
	call(t, g.Get("a"), breaker.Failure)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"b closed->open", "a closed->open"}, keys)
}

func BenchmarkGroupGetAllowDone(b *testing.B) {
	g, err := breaker.NewGroup(breaker.Config{})
	require.NoError(b, err)
	g.Get(testKey)
	b.ReportAllocs()
	for b.Loop() {
		br := g.Get(testKey)
		p, err := br.Allow()
		if err != nil {
			b.Fatal(err)
		}
		br.Done(p, breaker.Success)
	}
}
