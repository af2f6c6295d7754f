package tokenbucket

import (
	"math"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestCapacity(t *testing.T) {
	tests := []struct {
		name string
		l    Limit
		want float64
	}{
		{"one second of 600 rpm", Limit{PerMinute: 600, Burst: time.Second}, 10},
		{"default burst is one second", Limit{PerMinute: 600}, 10},
		{"a whole minute", Limit{PerMinute: 600, Burst: time.Minute}, 600},
		{"at least one unit", Limit{PerMinute: 30, Burst: time.Second}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.l.Capacity(); got != tt.want {
				t.Fatalf("Capacity() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRefillFitsWait(t *testing.T) {
	l := Limit{PerMinute: 600, Burst: time.Second} // 10/s, capacity 10
	tests := []struct {
		name     string
		b        Bucket
		after    time.Duration
		cost     float64
		wantLvl  float64
		wantFits bool
		wantWait time.Duration
	}{
		{"full bucket fits", Full(l, t0), 0, 1, 10, true, 0},
		{"refill is capped", Bucket{Level: 9, At: t0}, time.Minute, 1, 10, true, 0},
		{"empty waits for one unit", Bucket{Level: 0, At: t0}, 0, 1, 0, false, 100*time.Millisecond + time.Microsecond},
		{"refills with time", Bucket{Level: 0, At: t0}, 250 * time.Millisecond, 2, 2.5, true, 0},
		{"a cost over capacity waits for a full bucket", Bucket{Level: 5, At: t0}, 0, 50, 5, false, 500*time.Millisecond + time.Microsecond},
		{"a cost over capacity fits a full bucket", Full(l, t0), 0, 50, 10, true, 0},
		{"debt is paid first", Bucket{Level: -10, At: t0}, 0, 1, -10, false, 1100*time.Millisecond + time.Microsecond},
		{"a clock going back refills nothing", Bucket{Level: 3, At: t0}, -time.Second, 1, 3, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.b.Refilled(l, t0.Add(tt.after))
			if math.Abs(b.Level-tt.wantLvl) > 1e-9 {
				t.Fatalf("level %v, want %v", b.Level, tt.wantLvl)
			}
			if got := b.Fits(l, tt.cost); got != tt.wantFits {
				t.Fatalf("Fits = %v, want %v", got, tt.wantFits)
			}
			if got := b.Wait(l, tt.cost); got != tt.wantWait {
				t.Fatalf("Wait = %v, want %v", got, tt.wantWait)
			}
		})
	}
}

func TestWaitThenFits(t *testing.T) {
	l := Limit{PerMinute: 1234, Burst: 3 * time.Second}
	b := Bucket{Level: -17.3, At: t0}
	for _, cost := range []float64{1, 7.5, 1000} {
		w := b.Wait(l, cost)
		if !b.Refilled(l, t0.Add(w)).Fits(l, cost) {
			t.Fatalf("cost %v: the bucket does not fit after the wait %v", cost, w)
		}
		if w > time.Millisecond && b.Refilled(l, t0.Add(w-time.Millisecond)).Fits(l, cost) {
			t.Fatalf("cost %v: the bucket fits a millisecond before the wait %v ends", cost, w)
		}
	}
}

func TestNoLimitNeverFits(t *testing.T) {
	l := Limit{PerMinute: 0}
	b := Bucket{Level: 0, At: t0}
	if w := b.Wait(l, 2); w != math.MaxInt64 {
		t.Fatalf("Wait = %v, want the longest duration", w)
	}
}

func TestUntilFull(t *testing.T) {
	l := Limit{PerMinute: 600, Burst: time.Second}
	if got := (Bucket{Level: 4, At: t0}).UntilFull(l); got != 600*time.Millisecond+time.Microsecond {
		t.Fatalf("UntilFull = %v", got)
	}
	if got := Full(l, t0).UntilFull(l); got != 0 {
		t.Fatalf("UntilFull of a full bucket = %v", got)
	}
}
