package providertest

import (
	"github.com/stretchr/testify/assert"

	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/provider"
)

// testRateLimits checks what RateLimits reads of the Features' headers.
func testRateLimits(t suiteT, p provider.Provider, f *Features) {
	for _, rc := range f.RateLimits {
		t.Run(rc.Name, func(t suiteT) {
			var got guard.Observed
			if noPanic(t, "RateLimits", func() { got = p.RateLimits(header(rc.Header), Now) }) {
				assert.Equal(t, rc.Want, got)
			}
		})
	}
}

// badHeaderValues replace, one at a time, every value of the Features'
// rate-limit headers.
var badHeaderValues = []string{"", " ", "-5", "abc", "1e400", "99999999999999999999", "-1s", "NaN", "\xff"}

// testRateLimitInvariants checks what every provider's RateLimits does:
// nothing from no headers, and never a panic or a negative limit or
// remaining count, whatever the values.
func testRateLimitInvariants(t suiteT, p provider.Provider, f *Features) {
	for _, h := range []map[string]string{nil, {}, {"Content-Type": "application/json"}} {
		var o guard.Observed
		noPanic(t, "RateLimits", func() { o = p.RateLimits(header(h), Now) })
		assert.True(t, o.Empty(), "RateLimits(%v) = %+v; no rate-limit headers say nothing", h, o)
	}
	for _, rc := range f.RateLimits {
		for k := range rc.Header {
			for _, v := range badHeaderValues {
				h := header(rc.Header)
				h.Set(k, v)
				var o guard.Observed
				noPanic(t, "RateLimits", func() { o = p.RateLimits(h, Now) })
				for d := range o.Limit {
					if o.Limit[d] < 0 || o.Remaining[d] < 0 {
						t.Errorf("RateLimits(%s: %q) = %+v: a negative count", k, v, o)
					}
				}
			}
		}
	}
}
