package fakeprovider

import (
	"cmp"
	"slices"

	"github.com/agentledger/ledger/internal/provider"
	"github.com/agentledger/ledger/internal/provider/fakekit"
)

// DialectsOf returns the dialects of the providers that have one
// (fakekit.Faker), in their order.
func DialectsOf(ps []provider.Provider) []*fakekit.Dialect {
	var out []*fakekit.Dialect
	for _, p := range ps {
		if f, ok := p.(fakekit.Faker); ok {
			if d := f.Fake(); d != nil {
				out = append(out, d)
			}
		}
	}
	return out
}

// Dialects returns the dialects of the built-in providers (those whose
// package the program links, provider.All), in the order they registered.
func Dialects() []*fakekit.Dialect { return DialectsOf(provider.All()) }

// Dialect returns the dialect of the built-in provider named name.
func Dialect(name string) (*fakekit.Dialect, bool) {
	p, ok := provider.Lookup(name)
	if !ok {
		return nil, false
	}
	ds := DialectsOf([]provider.Provider{p})
	if len(ds) == 0 {
		return nil, false
	}
	return ds[0], true
}

// Simulated returns the dialects of ds that the simulator can drive (Sim
// set), in the simulator's order: by Sim.Order, then by name.
func Simulated(ds []*fakekit.Dialect) []*fakekit.Dialect {
	var out []*fakekit.Dialect
	for _, d := range ds {
		if d.Sim != nil {
			out = append(out, d)
		}
	}
	slices.SortStableFunc(out, func(a, b *fakekit.Dialect) int {
		return cmp.Or(cmp.Compare(a.Sim.Order, b.Sim.Order), cmp.Compare(a.Provider, b.Provider))
	})
	return out
}

// Providers lists the built-in providers the simulator can drive against
// the fake provider, in its default order (Simulated).
func Providers() []string {
	var names []string
	for _, d := range Simulated(Dialects()) {
		names = append(names, d.Provider)
	}
	return names
}
