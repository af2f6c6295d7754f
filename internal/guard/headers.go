package guard

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Observed is what a response's rate-limit headers say, by dimension.
type Observed struct {
	// Limit is the per-minute limit; 0 where the headers say none.
	Limit Limits
	// Remaining is what is left now, valid where HasRemaining.
	Remaining    [NumDims]int64
	HasRemaining [NumDims]bool
	// Reset is when the limit is fully replenished; zero where unsaid.
	Reset [NumDims]time.Time
}

// Empty reports whether the headers said nothing.
func (o *Observed) Empty() bool {
	return !o.Limit.Any() && o.HasRemaining == [NumDims]bool{} && o.Reset == [NumDims]time.Time{}
}

// HeaderNames are the canonical names of one dimension's rate-limit
// headers in one provider's style: its limit, what remains, and when it
// is fully replenished.
type HeaderNames struct {
	Dim                     Dim
	Limit, Remaining, Reset string
	// ResetIsDate: Reset holds an RFC 3339 time; else a duration from now
	// ("6m0s", "20ms"; a bare number is seconds).
	ResetIsDate bool
}

// RateLimitHeaders are the rate-limit headers one provider sends with
// every response, one entry per dimension: each provider declares its
// own (Anthropic's anthropic-ratelimit-*, OpenAI's x-ratelimit-*). The
// names must be canonical, so that Get does not allocate.
type RateLimitHeaders []HeaderNames

// RateLimitParser reads the rate-limit headers of a response in one
// provider's style (a provider.Provider is one).
type RateLimitParser interface {
	RateLimits(h http.Header, now time.Time) Observed
}

// maxHeaderValue bounds a limit or remaining count: anything larger is
// garbage (and would overflow the float arithmetic's precision).
const maxHeaderValue = 1e15

// RateLimits reads the headers hs names from h. Values that do not parse
// (negative, not a number, an unknown time format) are ignored, one by
// one; h may be nil.
func (hs RateLimitHeaders) RateLimits(h http.Header, now time.Time) Observed {
	var o Observed
	if len(h) == 0 {
		return o
	}
	for _, n := range hs {
		if v, ok := count(h.Get(n.Limit)); ok && v > 0 {
			o.Limit[n.Dim] = v
		}
		if v, ok := count(h.Get(n.Remaining)); ok {
			o.Remaining[n.Dim], o.HasRemaining[n.Dim] = v, true
		}
		if t, ok := resetTime(h.Get(n.Reset), n.ResetIsDate, now); ok {
			o.Reset[n.Dim] = t
		}
	}
	return o
}

// count parses a non-negative integer header value.
func count(v string) (int64, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > maxHeaderValue {
		return 0, false
	}
	return n, true
}

// resetTime parses a reset header: an RFC 3339 time, or a duration from
// now ("1s", "6m0s", "20ms"; a bare number is seconds).
func resetTime(v string, isDate bool, now time.Time) (time.Time, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, false
	}
	if isDate {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil || t.Year() < 1 || t.Year() > 9999 {
			return time.Time{}, false
		}
		return t, true
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if !(s >= 0 && s < 1e6) {
			return time.Time{}, false
		}
		return now.Add(time.Duration(s * float64(time.Second))), true
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > 1e6*time.Second {
		return time.Time{}, false
	}
	return now.Add(d), true
}
