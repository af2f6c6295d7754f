package retry

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	date := func(d time.Duration) string { return now.Add(d).Format(http.TimeFormat) }
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration
		wantOK bool
	}{
		{"none", nil, 0, false},
		{"ms", map[string]string{"retry-after-ms": "1500"}, 1500 * time.Millisecond, true},
		{"fractional ms", map[string]string{"retry-after-ms": "2.5"}, 2500 * time.Microsecond, true},
		{"zero ms", map[string]string{"retry-after-ms": "0"}, 0, true},
		{"ms with spaces", map[string]string{"retry-after-ms": " 20 "}, 20 * time.Millisecond, true},
		{"seconds", map[string]string{"retry-after": "7"}, 7 * time.Second, true},
		{"fractional seconds", map[string]string{"retry-after": "1.25"}, 1250 * time.Millisecond, true},
		{"zero seconds", map[string]string{"retry-after": "0"}, 0, true},
		{"canonical header name", map[string]string{"Retry-After": "3"}, 3 * time.Second, true},
		{"date in the future", map[string]string{"retry-after": date(90 * time.Second)}, 90 * time.Second, true},
		{"date in the past", map[string]string{"retry-after": date(-time.Hour)}, 0, true},
		{"date now", map[string]string{"retry-after": date(0)}, 0, true},
		{"garbage", map[string]string{"retry-after": "soon"}, 0, false},
		{"garbage ms", map[string]string{"retry-after-ms": "soon"}, 0, false},
		{"negative seconds", map[string]string{"retry-after": "-5"}, 0, false},
		{"negative ms", map[string]string{"retry-after-ms": "-5"}, 0, false},
		{"NaN seconds", map[string]string{"retry-after": "NaN"}, 0, false},
		{"NaN ms", map[string]string{"retry-after-ms": "NaN"}, 0, false},
		{"Inf seconds", map[string]string{"retry-after": "Inf"}, 0, false},
		{"Inf ms", map[string]string{"retry-after-ms": "+Inf"}, 0, false},
		{"absurd seconds", map[string]string{"retry-after": "1e300"}, 0, false},
		{"absurd ms", map[string]string{"retry-after-ms": "1e300"}, 0, false},
		{"empty", map[string]string{"retry-after": "  "}, 0, false},
		{"both: ms wins", map[string]string{"retry-after-ms": "250", "retry-after": "9"}, 250 * time.Millisecond, true},
		{"both: ms wins over a date", map[string]string{"retry-after-ms": "250", "retry-after": date(time.Minute)}, 250 * time.Millisecond, true},
		{"bad ms falls back to seconds", map[string]string{"retry-after-ms": "x", "retry-after": "4"}, 4 * time.Second, true},
		{"negative ms falls back to seconds", map[string]string{"retry-after-ms": "-1", "retry-after": "4"}, 4 * time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h http.Header
			if tt.header != nil {
				h = http.Header{}
				for k, v := range tt.header {
					h.Set(k, v)
				}
			}
			got, ok := ParseRetryAfter(h, now)
			assert.Equal(t, tt.wantOK, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}
