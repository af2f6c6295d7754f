package pricebook

import (
	"reflect"
	"time"

	"github.com/agentledger/ledger/internal/pricing"
)

// ForwardOnly reports whether next prices every attempt a ledger priced
// with prev has applied exactly as prev does, so that the ledger may go
// on with next without re-pricing its history. through is the latest
// started_at of those attempts (the ledger keeps it with its
// checkpoint): every entry of prev is in next with the same prices, and
// every entry next adds takes effect after through, whether it is a new
// dated price of a priced model or the first price of a new model (or an
// exact ID under a priced family: the lookup falls back to the family
// before the exact ID's first date).
//
// The attempts the ledger applied are judged, not a clock: an attempt
// may start after a process's now (another host's clock), and a new
// model's entry dated in the past would price the attempts of that model
// the ledger already counted as unpriced, which a rebuild with next
// would price and verify would report. Such a catalog is adopted by a
// rebuild; to adopt a new model's price without one, date it after the
// ledger's last attempt (from today, say). An attempt applied later
// with an older started_at (an ingest of old logs) is priced with next,
// as a rebuild with next prices it.
func ForwardOnly(prev, next *pricing.Catalog, through time.Time) bool {
	type key struct {
		provider, model, tier string
		from                  time.Time
	}
	// The prices of an entry: its rates and long-context tiers (its
	// source, reading date and note are not prices).
	type prices struct {
		pricing.Rates
		Tiers []pricing.Tier
	}
	strip := func(e pricing.Entry) prices { return prices{e.Rates, e.Tiers} }
	old := map[key]prices{}
	for _, e := range prev.Entries() {
		old[key{e.Provider, e.Model, e.ServiceTier, e.EffectiveFrom}] = strip(e)
	}
	seen := 0
	for _, e := range next.Entries() {
		if o, ok := old[key{e.Provider, e.Model, e.ServiceTier, e.EffectiveFrom}]; ok {
			if !reflect.DeepEqual(o, strip(e)) {
				return false // a price rewritten
			}
			seen++
			continue
		}
		if !e.EffectiveFrom.After(through) {
			return false // an added price in effect for an attempt already applied
		}
	}
	return seen == len(old) // no entry removed
}
