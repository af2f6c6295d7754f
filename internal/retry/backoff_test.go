package retry

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDelay(t *testing.T) {
	p := DefaultPolicy() // base 1 s, jitter 0.2, max 30 s
	justBelow1 := math.Nextafter(1, 0)
	tests := []struct {
		name  string
		p     Policy
		retry int
		r     float64
		want  time.Duration
	}{
		{"r=0 is the low end", p, 0, 0, 800 * time.Millisecond},
		{"r=0.5 is unjittered", p, 0, 0.5, time.Second},
		{"r near 1 is the high end", p, 0, justBelow1, 1200 * time.Millisecond},
		{"doubles per retry, low", p, 1, 0, 1600 * time.Millisecond},
		{"doubles per retry, high", p, 2, justBelow1, 4800 * time.Millisecond},
		{"retry 4 unjittered", p, 4, 0.5, 16 * time.Second},
		{"capped after jitter", p, 4, justBelow1, 19200 * time.Millisecond},
		{"capped at max", p, 5, 0.5, 30 * time.Second},
		{"capped at max, low end", p, 6, 0, 30 * time.Second},
		{"no overflow at n=62", p, 62, 0.5, 30 * time.Second},
		{"no overflow at n=1000", p, 1000, 0, 30 * time.Second},
		{"no overflow at MaxInt", p, math.MaxInt, justBelow1, 30 * time.Second},
		{"negative retry counts as 0", p, -3, 0.5, time.Second},
		{"r=1 is clamped below 1", p, 0, 1, 1200 * time.Millisecond},
		{"r>1 is clamped", p, 0, 7, 1200 * time.Millisecond},
		{"r<0 is clamped", p, 0, -1, 800 * time.Millisecond},
		{"NaN r counts as 0", p, 0, math.NaN(), 800 * time.Millisecond},
		{"no jitter ignores r", Policy{BaseDelay: time.Second, MaxDelay: time.Minute}, 3, 0.99, 8 * time.Second},
		{"full jitter, r=0 gives 0", Policy{BaseDelay: time.Second, MaxDelay: time.Minute, Jitter: 1}, 1000, 0, 0},
		{"no cap saturates, not overflows", Policy{BaseDelay: time.Second}, 1000, 0.5, time.Duration(math.MaxInt64)},
		{"no cap, small retry", Policy{BaseDelay: time.Second}, 3, 0.5, 8 * time.Second},
		{"zero base gives 0", Policy{MaxDelay: time.Minute}, 3, 0.5, 0},
		{"max below base caps", Policy{BaseDelay: time.Minute, MaxDelay: time.Second}, 0, 0.5, time.Second},
		{"huge base saturates at max", Policy{BaseDelay: time.Duration(math.MaxInt64), MaxDelay: time.Duration(math.MaxInt64), Jitter: 0.2}, 1, 0.9, time.Duration(math.MaxInt64)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Delay(tt.p, tt.retry, tt.r)
			// Float rounding may cost a nanosecond at the high end.
			assert.InDelta(t, float64(tt.want), float64(got), 1, "got %v", got)
			assert.GreaterOrEqual(t, got, time.Duration(0))
		})
	}
}

// TestDelaySpread draws many r: every delay lies in the jitter band or at
// the cap, the band is covered end to end, and the mean is the unjittered
// value.
func TestDelaySpread(t *testing.T) {
	p := DefaultPolicy()
	rng := rand.New(rand.NewPCG(1, 2))
	for retry := range 8 {
		center := float64(p.BaseDelay) * math.Pow(2, float64(retry))
		lo, hi := center*(1-p.Jitter), center*(1+p.Jitter)
		var sum float64
		gotMin, gotMax := math.Inf(1), math.Inf(-1)
		const n = 20000
		for range n {
			d := float64(Delay(p, retry, rng.Float64()))
			sum += d
			gotMin, gotMax = min(gotMin, d), max(gotMax, d)
		}
		require.LessOrEqual(t, gotMax, float64(p.MaxDelay), "retry %d", retry)
		require.GreaterOrEqual(t, gotMin, min(lo, float64(p.MaxDelay))-1, "retry %d", retry)
		require.LessOrEqual(t, gotMax, hi+1, "retry %d", retry)
		switch {
		case lo >= float64(p.MaxDelay): // entirely capped
			assert.Equal(t, float64(p.MaxDelay), gotMin, "retry %d", retry)
			assert.Equal(t, float64(p.MaxDelay), gotMax, "retry %d", retry)
		case hi <= float64(p.MaxDelay):
			band := hi - lo
			assert.Less(t, gotMin-lo, band*0.01, "retry %d: low end not reached", retry)
			assert.Less(t, hi-gotMax, band*0.01, "retry %d: high end not reached", retry)
			assert.InEpsilon(t, center, sum/n, 0.01, "retry %d: mean", retry)
		default: // partly capped
			assert.Less(t, gotMin-lo, (hi-lo)*0.01, "retry %d", retry)
			assert.Equal(t, float64(p.MaxDelay), gotMax, "retry %d", retry)
		}
	}
}

func TestDelayMonotoneInRetryAndR(t *testing.T) {
	p := DefaultPolicy()
	for retry := range 40 {
		for _, r := range []float64{0, 0.25, 0.5, 0.75, 0.999} {
			assert.LessOrEqual(t, Delay(p, retry, r), Delay(p, retry+1, r), "retry %d r %v", retry, r)
			assert.LessOrEqual(t, Delay(p, retry, r), Delay(p, retry, r+0.0005), "retry %d r %v", retry, r)
		}
	}
}

func BenchmarkDelay(b *testing.B) {
	p := DefaultPolicy()
	var sink time.Duration
	for i := 0; b.Loop(); i++ {
		sink += Delay(p, i&7, 0.3)
	}
	_ = sink
}
