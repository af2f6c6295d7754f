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

// headerNames are the canonical header names of one dimension in one
// provider's style.
type headerNames struct {
	dim                     Dim
	limit, remaining, reset string
	resetIsDate             bool // RFC 3339 time; else a duration such as "6m0s"
}

// rateHeaders are the headers each provider sends with every response:
// Anthropic's anthropic-ratelimit-{requests,input-tokens,output-tokens}-
// {limit,remaining,reset} (reset an RFC 3339 time; the combined
// anthropic-ratelimit-tokens-* repeats the most restrictive of the two and
// is not read) and OpenAI's x-ratelimit-{limit,remaining,reset}-
// {requests,tokens} (reset a duration; tokens counts input plus output).
// Gemini sends none. The names are canonical, so Get does not allocate.
var rateHeaders = []headerNames{
	{Requests, "Anthropic-Ratelimit-Requests-Limit", "Anthropic-Ratelimit-Requests-Remaining", "Anthropic-Ratelimit-Requests-Reset", true},
	{InputTokens, "Anthropic-Ratelimit-Input-Tokens-Limit", "Anthropic-Ratelimit-Input-Tokens-Remaining", "Anthropic-Ratelimit-Input-Tokens-Reset", true},
	{OutputTokens, "Anthropic-Ratelimit-Output-Tokens-Limit", "Anthropic-Ratelimit-Output-Tokens-Remaining", "Anthropic-Ratelimit-Output-Tokens-Reset", true},
	{Requests, "X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests", false},
	{Tokens, "X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens", false},
}

// maxHeaderValue bounds a limit or remaining count: anything larger is
// garbage (and would overflow the float arithmetic's precision).
const maxHeaderValue = 1e15

// ParseHeaders reads the rate-limit headers of a response in Anthropic's
// or OpenAI's style. Values that do not parse (negative, not a number, an
// unknown time format) are ignored, one by one; h may be nil.
func ParseHeaders(h http.Header, now time.Time) Observed {
	var o Observed
	if len(h) == 0 {
		return o
	}
	for _, n := range rateHeaders {
		if v, ok := count(h.Get(n.limit)); ok && v > 0 {
			o.Limit[n.dim] = v
		}
		if v, ok := count(h.Get(n.remaining)); ok {
			o.Remaining[n.dim], o.HasRemaining[n.dim] = v, true
		}
		if t, ok := resetTime(h.Get(n.reset), n.resetIsDate, now); ok {
			o.Reset[n.dim] = t
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
