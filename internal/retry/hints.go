package retry

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ParseRetryAfter reads the server's hint of when to try again: first
// retry-after-ms (milliseconds), then retry-after (seconds, fractional
// allowed, or an HTTP date, relative to now). A missing, negative or
// unparseable header gives ok false; a date in the past gives 0, true.
//
// The keys are looked up in canonical form, which does not allocate.
func ParseRetryAfter(h http.Header, now time.Time) (d time.Duration, ok bool) {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && ms < maxHintMillis {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if !(s >= 0 && s < maxHintMillis/1000) { // also NaN
			return 0, false
		}
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d, true
		}
		return 0, true
	}
	return 0, false
}

// maxHintMillis bounds a numeric hint so the conversion cannot overflow a
// Duration (about 292 years); anything near it is garbage anyway.
const maxHintMillis = 1e12
