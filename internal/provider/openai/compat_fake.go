package openai

import (
	"net/http"
	"strconv"
	"time"

	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/provider/fakekit"
)

// FakePreset is how the fake provider speaks a preset's API where it
// differs from OpenAI's dialect (the rate-limit headers come from
// Preset.Limits).
type FakePreset struct {
	// TopLevelErrors: the API writes an error's fields at the top level,
	// {"object":"error","message",...,"type",...,"code",...} (Mistral,
	// older vLLM), not in OpenAI's "error" object.
	TopLevelErrors bool
	// Faults are the API's own answers to the fake provider's faults; a
	// rate limit (FaultRateLimit, and a tier's refusal) also gets the
	// retry-after headers and the preset's requests remaining 0.
	Faults map[fakekit.Fault]FakeError
}

// Fake is the API as the fake provider speaks it, under /NAME: OpenAI's
// dialect (FakeDialect) with the preset's rate-limit headers, error
// bodies and answers to faults, and its streams' usage.
func (p *compatProvider) Fake() *fakekit.Dialect {
	pr := p.preset
	opts := FakeOptions{UsageUnasked: pr.UsageUnasked, Fail: pr.fakeFail}
	if pr.Fake.TopLevelErrors {
		opts.ErrorBody = topLevelErrorBody
	}
	d := FakeDialect(p.Name(), opts)
	if len(pr.Limits) > 0 {
		d.LimitHeaders = pr.fakeLimitHeaders // the preset's names and formats
	}
	return d
}

// topLevelErrorBody is an error with its fields at the top level.
func topLevelErrorBody(e FakeError) any {
	var code any
	if e.Code != "" {
		code = e.Code
	}
	return map[string]any{"object": "error", "message": e.Message, "type": e.Type, "param": nil, "code": code}
}

// fakeFail answers the faults the preset answers its own way.
func (p *Preset) fakeFail(w http.ResponseWriter, d fakekit.Decision) (FakeError, bool) {
	f := d.Fault
	if f == fakekit.FaultTierLimit {
		f = fakekit.FaultRateLimit
	}
	e, ok := p.Fake.Faults[f]
	if !ok {
		return FakeError{}, false
	}
	if f == fakekit.FaultRateLimit {
		fakekit.RetryAfterHeaders(w, d)
		p.setLimitHeaders(w.Header(), fakekit.LimitState{Dimension: fakekit.Dimension{Name: "requests"}, UntilFull: d.RetryAfter, Now: time.Now()}, false)
	}
	return e, true
}

// fakeLimitHeaders writes the preset's rate-limit headers of the tier's
// dimensions (requests; tokens, input plus output).
func (p *Preset) fakeLimitHeaders(h http.Header, ls []fakekit.LimitState) {
	for _, l := range ls {
		p.setLimitHeaders(h, l, true)
	}
}

// fakeDims are the dimensions of the fake's tier (fakekit.CombinedLimits).
var fakeDims = map[string]guard.Dim{"requests": guard.Requests, "tokens": guard.Tokens}

// setLimitHeaders writes the headers of the preset's first limit of l's
// dimension: its limit (withLimit, when it counts a minute), what remains
// and when it resets.
func (p *Preset) setLimitHeaders(h http.Header, l fakekit.LimitState, withLimit bool) {
	dim, ok := fakeDims[l.Name]
	if !ok {
		return
	}
	for _, n := range p.Limits {
		if n.Dim != dim {
			continue
		}
		if withLimit && n.Limit != "" && n.LimitPerMinute {
			h.Set(n.Limit, strconv.FormatInt(l.Limit, 10))
		}
		if n.Remaining != "" {
			h.Set(n.Remaining, strconv.FormatInt(l.Remaining, 10))
		}
		if n.Reset != "" {
			h.Set(n.Reset, n.ResetFormat.format(l.UntilFull, l.Now))
		}
		return
	}
}

// format writes a reset d from now in f.
func (f ResetFormat) format(d time.Duration, now time.Time) string {
	if f == ResetUnixMillis {
		return strconv.FormatInt(now.Add(d).UnixMilli(), 10)
	}
	return d.Round(time.Millisecond).String()
}
