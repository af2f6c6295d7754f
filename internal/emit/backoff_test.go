package emit

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestBackoff(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name      string
		n         int
		base, max time.Duration
		r         float64
		want      time.Duration
	}{
		{"first try, low end", 1, 100 * ms, 10 * time.Second, 0, 50 * ms},
		{"first try, middle", 1, 100 * ms, 10 * time.Second, 0.5, 75 * ms},
		{"third try doubles twice", 3, 100 * ms, 10 * time.Second, 0, 200 * ms},
		{"capped at max", 10, 100 * ms, 1 * time.Second, 0, 500 * ms},
		{"huge n saturates", math.MaxInt, 100 * ms, 1 * time.Second, 0, 500 * ms},
		{"n below 1 counts as 1", -3, 100 * ms, 1 * time.Second, 0, 50 * ms},
		{"r = 1 clamps below the top", 1, 100 * ms, 1 * time.Second, 1, 100*ms - 1},
		{"r above 1 clamps", 1, 100 * ms, 1 * time.Second, 7, 100*ms - 1},
		{"negative r clamps to 0", 1, 100 * ms, 1 * time.Second, -1, 50 * ms},
		{"NaN r counts as 0", 1, 100 * ms, 1 * time.Second, math.NaN(), 50 * ms},
		{"max below base counts as base", 5, 100 * ms, 10 * ms, 0, 50 * ms},
		{"zero base means no wait", 4, 0, time.Second, 0.5, 0},
		{"no overflow near the top", 40, time.Second, time.Duration(math.MaxInt64), 0, time.Duration(math.MaxInt64 / 2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Backoff(tt.n, tt.base, tt.max, tt.r)
			assert.Equal(t, tt.want, got)
			assert.GreaterOrEqual(t, got, time.Duration(0))
		})
	}
}

func TestBackoffStaysInBand(t *testing.T) {
	base, max := 10*time.Millisecond, 640*time.Millisecond
	for n := 1; n <= 12; n++ {
		d := min(base<<(n-1), max)
		for _, r := range []float64{0, 0.25, 0.5, 0.999} {
			got := Backoff(n, base, max, r)
			assert.GreaterOrEqual(t, got, d/2, "n=%d r=%v", n, r)
			assert.Less(t, got, d, "n=%d r=%v", n, r)
		}
	}
}
