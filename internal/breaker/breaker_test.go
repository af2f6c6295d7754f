package breaker_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/testkit"
)

const (
	testKey      = "anthropic/claude-sonnet"
	testCooldown = 10 * time.Second
)

func newTestBreaker(t *testing.T, threshold int, clk *testkit.Clock) *breaker.Breaker {
	t.Helper()
	b, err := breaker.New(testKey, breaker.Config{
		FailureThreshold: threshold,
		Cooldown:         testCooldown,
		Now:              clk.Now,
	})
	require.NoError(t, err)
	return b
}

// admit asserts that Allow admits a call and returns its permit.
func admit(t *testing.T, b *breaker.Breaker) breaker.Permit {
	t.Helper()
	p, err := b.Allow()
	require.NoError(t, err)
	return p
}

// reject asserts that Allow rejects with an *OpenError and returns it.
func reject(t *testing.T, b *breaker.Breaker) *breaker.OpenError {
	t.Helper()
	p, err := b.Allow()
	require.Error(t, err)
	require.ErrorIs(t, err, breaker.ErrCircuitOpen)
	var oe *breaker.OpenError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, breaker.Permit{}, p, "a rejection returns the zero permit")
	return oe
}

// call runs one admitted call with result r.
func call(t *testing.T, b *breaker.Breaker, r breaker.Result) {
	t.Helper()
	b.Done(admit(t, b), r)
}

// trip opens a closed breaker with threshold consecutive failures.
func trip(t *testing.T, b *breaker.Breaker, threshold int) {
	t.Helper()
	for range threshold {
		call(t, b, breaker.Failure)
	}
	require.Equal(t, breaker.Open, b.State())
}

// halfOpen trips b, waits out the cooldown and returns the probe permit.
func halfOpen(t *testing.T, b *breaker.Breaker, clk *testkit.Clock, threshold int) breaker.Permit {
	t.Helper()
	trip(t, b, threshold)
	clk.Advance(testCooldown)
	p := admit(t, b)
	require.True(t, p.Probe())
	require.Equal(t, breaker.HalfOpen, b.State())
	return p
}

func TestConfigValidation(t *testing.T) {
	tests := []struct {
		name    string
		cfg     breaker.Config
		wantErr []string // substrings of the error; nil for a valid config
	}{
		{name: "zero value selects defaults", cfg: breaker.Config{}},
		{name: "explicit values", cfg: breaker.Config{FailureThreshold: 1, Cooldown: time.Millisecond}},
		{name: "negative threshold", cfg: breaker.Config{FailureThreshold: -1},
			wantErr: []string{"FailureThreshold", "-1", "negative"}},
		{name: "negative cooldown", cfg: breaker.Config{Cooldown: -time.Second},
			wantErr: []string{"Cooldown", "-1s", "negative"}},
		{name: "both negative names both", cfg: breaker.Config{FailureThreshold: -3, Cooldown: -time.Second},
			wantErr: []string{"FailureThreshold", "Cooldown"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			constructors := map[string]func(breaker.Config) error{
				"New": func(c breaker.Config) error {
					b, err := breaker.New(testKey, c)
					if err == nil {
						assert.NotNil(t, b)
					}
					return err
				},
				"NewGroup": func(c breaker.Config) error {
					g, err := breaker.NewGroup(c)
					if err == nil {
						assert.NotNil(t, g)
					}
					return err
				},
			}
			for name, construct := range constructors {
				err := construct(tt.cfg)
				if tt.wantErr == nil {
					assert.NoError(t, err, name)
					continue
				}
				require.Error(t, err, name)
				assert.ErrorIs(t, err, breaker.ErrInvalidConfig, name)
				for _, s := range tt.wantErr {
					assert.Contains(t, err.Error(), s, name)
				}
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	clk := testkit.NewClock()
	b, err := breaker.New(testKey, breaker.Config{Now: clk.Now})
	require.NoError(t, err)

	for range breaker.DefaultFailureThreshold - 1 {
		call(t, b, breaker.Failure)
	}
	require.Equal(t, breaker.Closed, b.State())
	opened := clk.Now()
	call(t, b, breaker.Failure)
	require.Equal(t, breaker.Open, b.State())
	assert.Equal(t, opened.Add(breaker.DefaultCooldown), reject(t, b).Until)
}

func TestClosedCounting(t *testing.T) {
	const (
		S = breaker.Success
		F = breaker.Failure
		I = breaker.Ignore
	)
	tests := []struct {
		name      string
		threshold int
		results   []breaker.Result
		want      breaker.State
	}{
		{name: "N-1 failures stay closed", threshold: 3, results: []breaker.Result{F, F}, want: breaker.Closed},
		{name: "N failures open", threshold: 3, results: []breaker.Result{F, F, F}, want: breaker.Open},
		{name: "threshold one opens on first failure", threshold: 1, results: []breaker.Result{F}, want: breaker.Open},
		{name: "success in between resets", threshold: 3, results: []breaker.Result{F, F, S, F, F}, want: breaker.Closed},
		{name: "N failures after a reset open", threshold: 3, results: []breaker.Result{F, F, S, F, F, F}, want: breaker.Open},
		{name: "ignore is not a failure", threshold: 3, results: []breaker.Result{I, I, I, I, I, I}, want: breaker.Closed},
		{name: "ignore does not reset the count", threshold: 3, results: []breaker.Result{F, I, F, I, F}, want: breaker.Open},
		{name: "ignore between does not add", threshold: 3, results: []breaker.Result{F, I, I, F}, want: breaker.Closed},
		{name: "unknown result is ignored", threshold: 2, results: []breaker.Result{F, breaker.Result(42), F}, want: breaker.Open},
		{name: "unknown result does not reset", threshold: 2, results: []breaker.Result{breaker.Result(42), F}, want: breaker.Closed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := testkit.NewClock()
			b := newTestBreaker(t, tt.threshold, clk)
			for i, r := range tt.results {
				require.Equal(t, breaker.Closed, b.State(), "before result %d", i)
				call(t, b, r)
			}
			assert.Equal(t, tt.want, b.State())
			if tt.want == breaker.Closed {
				admit(t, b)
			} else {
				reject(t, b)
			}
		})
	}
}

func TestRejectsWhileOpen(t *testing.T) {
	clk := testkit.NewClock()
	b := newTestBreaker(t, 2, clk)
	call(t, b, breaker.Failure)
	clk.Advance(time.Second)
	openedAt := clk.Now()
	call(t, b, breaker.Failure)
	wantUntil := openedAt.Add(testCooldown)

	for _, after := range []time.Duration{0, time.Second, testCooldown - time.Nanosecond} {
		clk.Advance(after - clk.Now().Sub(openedAt))
		oe := reject(t, b)
		assert.Equal(t, testKey, oe.Key)
		assert.Equal(t, breaker.Open, oe.State)
		assert.Equal(t, wantUntil, oe.Until, "Until is the end of the cooldown, %v after opening", after)
		assert.Contains(t, oe.Error(), testKey)
		assert.Contains(t, oe.Error(), "circuit open")
		assert.Equal(t, breaker.Open, b.State())
	}

	clk.Advance(time.Nanosecond) // cooldown has now passed exactly
	p := admit(t, b)
	assert.True(t, p.Probe())
	assert.Equal(t, breaker.HalfOpen, b.State())

	oe := reject(t, b)
	assert.Equal(t, breaker.HalfOpen, oe.State)
	assert.True(t, oe.Until.IsZero(), "Until is zero while a probe is in flight")
	assert.Contains(t, oe.Error(), "probe in flight")
}

func TestStateReportsHalfOpenAfterCooldown(t *testing.T) {
	clk := testkit.NewClock()
	b := newTestBreaker(t, 1, clk)
	trip(t, b, 1)
	clk.Advance(testCooldown)
	assert.Equal(t, breaker.HalfOpen, b.State())
	p := admit(t, b)
	assert.True(t, p.Probe(), "the first caller after the cooldown is the probe")
	reject(t, b)
}

func TestHalfOpenAdmitsExactlyOneProbeConcurrently(t *testing.T) {
	const callers = 64
	for round := range 20 {
		t.Run(fmt.Sprint("round", round), func(t *testing.T) {
			clk := testkit.NewClock()
			b := newTestBreaker(t, 1, clk)
			trip(t, b, 1)
			clk.Advance(testCooldown)

			var (
				start    = make(chan struct{})
				wg       sync.WaitGroup
				admitted atomic.Int32
				probes   = make(chan breaker.Permit, callers)
				errs     = make(chan error, callers)
			)
			for range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					p, err := b.Allow()
					if err != nil {
						errs <- err
						return
					}
					admitted.Add(1)
					probes <- p
				}()
			}
			close(start)
			wg.Wait()
			close(probes)
			close(errs)

			require.Equal(t, int32(1), admitted.Load(), "exactly one probe")
			p := <-probes
			assert.True(t, p.Probe())
			var rejected int
			for err := range errs {
				rejected++
				var oe *breaker.OpenError
				require.ErrorAs(t, err, &oe)
				assert.Equal(t, breaker.HalfOpen, oe.State)
			}
			assert.Equal(t, callers-1, rejected)

			b.Done(p, breaker.Success)
			assert.Equal(t, breaker.Closed, b.State())
		})
	}
}

func TestProbeOutcome(t *testing.T) {
	const threshold = 3
	tests := []struct {
		name   string
		result breaker.Result
		check  func(t *testing.T, b *breaker.Breaker, clk *testkit.Clock, reportedAt time.Time)
	}{
		{
			name:   "success closes and resets counts",
			result: breaker.Success,
			check: func(t *testing.T, b *breaker.Breaker, _ *testkit.Clock, _ time.Time) {
				assert.Equal(t, breaker.Closed, b.State())
				for range 5 {
					p := admit(t, b)
					assert.False(t, p.Probe())
				}
				for range threshold - 1 {
					call(t, b, breaker.Failure)
				}
				assert.Equal(t, breaker.Closed, b.State(), "count started again from zero")
				call(t, b, breaker.Failure)
				assert.Equal(t, breaker.Open, b.State())
			},
		},
		{
			name:   "failure reopens with a fresh cooldown",
			result: breaker.Failure,
			check: func(t *testing.T, b *breaker.Breaker, clk *testkit.Clock, reportedAt time.Time) {
				assert.Equal(t, breaker.Open, b.State())
				oe := reject(t, b)
				assert.Equal(t, breaker.Open, oe.State)
				assert.Equal(t, reportedAt.Add(testCooldown), oe.Until, "cooldown counts from the probe's failure")
				clk.Advance(testCooldown - time.Nanosecond)
				reject(t, b)
				clk.Advance(time.Nanosecond)
				assert.True(t, admit(t, b).Probe())
			},
		},
		{
			name:   "ignore frees the slot and stays half-open",
			result: breaker.Ignore,
			check: func(t *testing.T, b *breaker.Breaker, _ *testkit.Clock, _ time.Time) {
				assert.Equal(t, breaker.HalfOpen, b.State())
				p := admit(t, b)
				assert.True(t, p.Probe(), "the next caller probes")
				reject(t, b)
				b.Done(p, breaker.Success)
				assert.Equal(t, breaker.Closed, b.State())
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := testkit.NewClock()
			b := newTestBreaker(t, threshold, clk)
			p := halfOpen(t, b, clk, threshold)
			clk.Advance(3 * time.Second) // the probe takes a while
			reportedAt := clk.Now()
			b.Done(p, tt.result)
			tt.check(t, b, clk, reportedAt)
		})
	}
}

func TestStaleGenerationDropped(t *testing.T) {
	const threshold = 2

	t.Run("closed-era result does not touch the probe", func(t *testing.T) {
		for _, late := range []breaker.Result{breaker.Success, breaker.Failure, breaker.Ignore} {
			t.Run(late.String(), func(t *testing.T) {
				clk := testkit.NewClock()
				b := newTestBreaker(t, threshold, clk)
				slow := admit(t, b) // admitted while closed, reports late
				probe := halfOpen(t, b, clk, threshold)

				b.Done(slow, late)
				assert.Equal(t, breaker.HalfOpen, b.State(), "late %v must not change the state", late)
				reject(t, b) // the probe is still in flight: the slot was not freed

				b.Done(probe, breaker.Success)
				assert.Equal(t, breaker.Closed, b.State())
			})
		}
	})

	t.Run("closed-era failure does not count after reclosing", func(t *testing.T) {
		clk := testkit.NewClock()
		b := newTestBreaker(t, threshold, clk)
		slow := admit(t, b)
		probe := halfOpen(t, b, clk, threshold)
		b.Done(probe, breaker.Success)
		require.Equal(t, breaker.Closed, b.State())

		b.Done(slow, breaker.Failure) // from the previous closed era
		call(t, b, breaker.Failure)
		assert.Equal(t, breaker.Closed, b.State(), "only one current failure")
		call(t, b, breaker.Failure)
		assert.Equal(t, breaker.Open, b.State())
	})

	t.Run("results after opening are dropped", func(t *testing.T) {
		clk := testkit.NewClock()
		b := newTestBreaker(t, threshold, clk)
		inflight := make([]breaker.Permit, 5)
		for i := range inflight {
			inflight[i] = admit(t, b)
		}
		b.Done(inflight[0], breaker.Failure)
		b.Done(inflight[1], breaker.Failure)
		require.Equal(t, breaker.Open, b.State())
		openUntil := reject(t, b).Until
		clk.Advance(time.Second)
		b.Done(inflight[2], breaker.Failure) // would restart the cooldown if counted
		b.Done(inflight[3], breaker.Success) // would close if counted
		assert.Equal(t, breaker.Open, b.State())
		assert.Equal(t, openUntil, reject(t, b).Until)
	})

	t.Run("probe reported twice", func(t *testing.T) {
		clk := testkit.NewClock()
		b := newTestBreaker(t, threshold, clk)
		first := halfOpen(t, b, clk, threshold)
		b.Done(first, breaker.Ignore)
		b.Done(first, breaker.Failure) // second report before a new probe
		assert.Equal(t, breaker.HalfOpen, b.State())
		second := admit(t, b)
		require.True(t, second.Probe())

		b.Done(first, breaker.Failure) // second report of a released probe
		assert.Equal(t, breaker.HalfOpen, b.State())
		reject(t, b)
		b.Done(second, breaker.Success)
		assert.Equal(t, breaker.Closed, b.State())
	})

	t.Run("zero permit is ignored", func(t *testing.T) {
		clk := testkit.NewClock()
		b := newTestBreaker(t, 1, clk)
		b.Done(breaker.Permit{}, breaker.Failure)
		assert.Equal(t, breaker.Closed, b.State())
		probe := halfOpen(t, b, clk, 1)
		b.Done(breaker.Permit{}, breaker.Success)
		assert.Equal(t, breaker.HalfOpen, b.State())
		b.Done(probe, breaker.Success)
		assert.Equal(t, breaker.Closed, b.State())
	})
}

func TestStuckProbeExpires(t *testing.T) {
	for _, late := range []breaker.Result{breaker.Success, breaker.Failure, breaker.Ignore} {
		t.Run("late "+late.String(), func(t *testing.T) {
			clk := testkit.NewClock()
			b := newTestBreaker(t, 1, clk)
			stuck := halfOpen(t, b, clk, 1)

			clk.Advance(testCooldown - time.Nanosecond)
			oe := reject(t, b)
			assert.Equal(t, breaker.HalfOpen, oe.State)

			clk.Advance(time.Nanosecond) // the probe has been out for a whole cooldown
			fresh := admit(t, b)
			require.True(t, fresh.Probe())
			reject(t, b) // the replacement holds the slot

			b.Done(stuck, late)
			assert.Equal(t, breaker.HalfOpen, b.State(), "the replaced probe's result is dropped")
			reject(t, b)

			b.Done(fresh, breaker.Failure)
			assert.Equal(t, breaker.Open, b.State())
		})
	}
}

func TestOnStateChangeSequence(t *testing.T) {
	clk := testkit.NewClock()
	type change struct {
		key      string
		from, to breaker.State
	}
	var (
		got []change
		b   *breaker.Breaker
	)
	b, err := breaker.New(testKey, breaker.Config{
		FailureThreshold: 1,
		Cooldown:         testCooldown,
		Now:              clk.Now,
		OnStateChange: func(key string, from, to breaker.State) {
			got = append(got, change{key, from, to})
			// Called outside the lock: calling back must not deadlock.
			_ = b.State()
		},
	})
	require.NoError(t, err)

	call(t, b, breaker.Failure) // closed -> open
	clk.Advance(testCooldown)
	p := admit(t, b)          // open -> half-open
	b.Done(p, breaker.Ignore) // no change
	p = admit(t, b)
	b.Done(p, breaker.Failure) // half-open -> open
	clk.Advance(testCooldown)
	require.Equal(t, breaker.HalfOpen, b.State()) // open -> half-open via State
	p = admit(t, b)
	b.Done(p, breaker.Success) // half-open -> closed
	call(t, b, breaker.Success)

	want := []change{
		{testKey, breaker.Closed, breaker.Open},
		{testKey, breaker.Open, breaker.HalfOpen},
		{testKey, breaker.HalfOpen, breaker.Open},
		{testKey, breaker.Open, breaker.HalfOpen},
		{testKey, breaker.HalfOpen, breaker.Closed},
	}
	assert.Equal(t, want, got)
}

func TestOnStateChangeOrderedUnderConcurrency(t *testing.T) {
	clk := testkit.NewClock()
	clk.AutoStep(time.Millisecond) // concurrent callers see time pass
	var (
		mu      sync.Mutex
		changes []breaker.State // the "to" of every change, in delivery order
		broken  []string
		last    = breaker.Closed
	)
	b, err := breaker.New(testKey, breaker.Config{
		FailureThreshold: 2,
		Cooldown:         3 * time.Millisecond,
		Now:              clk.Now,
		OnStateChange: func(_ string, from, to breaker.State) {
			mu.Lock()
			defer mu.Unlock()
			if from != last {
				broken = append(broken, fmt.Sprintf("change %d: from %v, but last delivered state was %v", len(changes), from, last))
			}
			last = to
			changes = append(changes, to)
		},
	})
	require.NoError(t, err)

	const (
		workers = 8
		calls   = 2000
	)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				p, err := b.Allow()
				if err != nil {
					continue
				}
				r := breaker.Failure
				if (i+w)%3 == 0 {
					r = breaker.Success
				}
				b.Done(p, r)
			}
		}()
	}
	wg.Wait()
	current := b.State() // may itself deliver Open -> HalfOpen, so before mu

	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, broken, "transitions delivered out of order")
	require.NotEmpty(t, changes)
	assert.Equal(t, current, last, "the last delivered state is the current one")
	seen := map[breaker.State]bool{}
	for _, s := range changes {
		seen[s] = true
	}
	assert.Len(t, seen, 3, "the run went through every state: %v", seen)
}

func TestOnStateChangePanicDoesNotStopDelivery(t *testing.T) {
	clk := testkit.NewClock()
	var got []breaker.State
	b, err := breaker.New(testKey, breaker.Config{
		FailureThreshold: 1,
		Cooldown:         testCooldown,
		Now:              clk.Now,
		OnStateChange: func(_ string, _, to breaker.State) {
			got = append(got, to)
			if len(got) == 1 {
				panic("callback bug")
			}
		},
	})
	require.NoError(t, err)

	p := admit(t, b)
	assert.Panics(t, func() { b.Done(p, breaker.Failure) })
	assert.Equal(t, breaker.Open, b.State(), "the transition happened before the callback")
	clk.Advance(testCooldown)
	admit(t, b)
	assert.Equal(t, []breaker.State{breaker.Open, breaker.HalfOpen}, got)
}

func TestStrings(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{breaker.Closed.String(), "closed"},
		{breaker.Open.String(), "open"},
		{breaker.HalfOpen.String(), "half_open"},
		{breaker.State(9).String(), "State(9)"},
		{breaker.Success.String(), "success"},
		{breaker.Failure.String(), "failure"},
		{breaker.Ignore.String(), "ignore"},
		{breaker.Result(-1).String(), "Result(-1)"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.got)
	}
}

func TestOpenErrorUnwrap(t *testing.T) {
	var err error = &breaker.OpenError{Key: "k", Until: time.Unix(10, 0).UTC(), State: breaker.Open}
	assert.ErrorIs(t, err, breaker.ErrCircuitOpen)
	assert.Equal(t, breaker.ErrCircuitOpen, errors.Unwrap(err))
	assert.Equal(t, `breaker "k": circuit open until 1970-01-01T00:00:10Z`, err.Error())
	wrapped := fmt.Errorf("attempt 2: %w", err)
	var oe *breaker.OpenError
	require.ErrorAs(t, wrapped, &oe)
	assert.Equal(t, "k", oe.Key)
}

func TestAdmittedPathDoesNotAllocate(t *testing.T) {
	clk := testkit.NewClock()
	b := newTestBreaker(t, 5, clk)
	allocs := testing.AllocsPerRun(1000, func() {
		p, err := b.Allow()
		if err != nil {
			t.Fatal(err)
		}
		b.Done(p, breaker.Success)
	})
	assert.Zero(t, allocs)

	// The probe path does not allocate either (the transitions it causes
	// are not counted: no callback is set).
	b = newTestBreaker(t, 1, clk)
	allocs = testing.AllocsPerRun(100, func() {
		p, _ := b.Allow()
		b.Done(p, breaker.Failure) // closed -> open
		clk.Advance(testCooldown)
		p, err := b.Allow() // open -> half-open, probe
		if err != nil || !p.Probe() {
			t.Fatalf("want probe, got %v %v", p, err)
		}
		b.Done(p, breaker.Success) // half-open -> closed
	})
	assert.Zero(t, allocs)
}

func BenchmarkAllowDoneClosed(b *testing.B) {
	br, err := breaker.New(testKey, breaker.Config{})
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		p, err := br.Allow()
		if err != nil {
			b.Fatal(err)
		}
		br.Done(p, breaker.Success)
	}
}

func BenchmarkAllowDoneClosedParallel(b *testing.B) {
	br, err := breaker.New(testKey, breaker.Config{})
	require.NoError(b, err)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, err := br.Allow()
			if err != nil {
				b.Error(err)
				return
			}
			br.Done(p, breaker.Success)
		}
	})
}
