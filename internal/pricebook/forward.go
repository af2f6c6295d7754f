package pricebook

import (
	"reflect"
	"time"

	"github.com/agentledger/ledger/internal/pricing"
)

// ForwardOnly reports whether next prices every attempt that started
// before now exactly as prev does, so that a ledger priced with prev may
// go on with next without re-pricing its history: every entry of prev is
// in next with the same rates, and every entry next adds either takes
// effect after now (a future price) or prices a provider, model and tier
// prev has no entry for and does not shadow one (an exact model ID whose
// family prev prices would change the price of that ID's past attempts).
// A new model's past attempts stay unpriced until a rebuild; verify
// shows them.
func ForwardOnly(prev, next *pricing.Catalog, now time.Time) bool {
	type key struct{ provider, model, tier string }
	type dated struct {
		key
		from time.Time
	}
	// The prices of an entry: its rates and long-context tiers (its
	// source, reading date and note are not prices).
	type prices struct {
		pricing.Rates
		Tiers []pricing.Tier
	}
	strip := func(e pricing.Entry) prices { return prices{e.Rates, e.Tiers} }
	old := map[dated]prices{}
	keys := map[key]bool{}
	for _, e := range prev.Entries() {
		k := key{e.Provider, e.Model, e.ServiceTier}
		old[dated{k, e.EffectiveFrom}] = strip(e)
		keys[k] = true
	}
	seen := 0
	for _, e := range next.Entries() {
		k := key{e.Provider, e.Model, e.ServiceTier}
		if o, ok := old[dated{k, e.EffectiveFrom}]; ok {
			if !reflect.DeepEqual(o, strip(e)) {
				return false // a price rewritten
			}
			seen++
			continue
		}
		switch {
		case e.EffectiveFrom.After(now):
			// a future price
		case keys[k]:
			return false // a new dated price of a priced model, already in effect
		default:
			if fam := pricing.Family(e.Provider, e.Model); fam != e.Model && keys[key{e.Provider, fam, e.ServiceTier}] {
				return false // an exact ID that shadows its family's price
			}
		}
	}
	return seen == len(old) // no entry removed
}
