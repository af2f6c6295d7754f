package projection

import "github.com/agentledger/ledger/internal/pricing"

// CostObserver is told, once a batch has committed, of the money the
// batch added to the ledger per provider and model: the change of the
// records it wrote (each attempt's cost counted under its own model; a
// request's usage under its winning attempt's). An Observer that also
// implements CostObserver gets these calls, on the committing goroutine.
// A change can be negative (an event that replaces another, a later
// success that moves a request's usage to another model).
type CostObserver interface {
	CostCommitted(provider, model string, d ModelCost)
}

// ModelCost is money and unpriced tokens of one provider and model.
type ModelCost struct {
	Usage, Billed                 pricing.Money
	UnpricedUsage, UnpricedBilled int64
}

// modelKey names one provider and model.
type modelKey struct{ provider, model string }

// modelCosts is what a request record holds per provider and model;
// records have a handful of attempts, so a slice.
type modelCosts []struct {
	k modelKey
	c ModelCost
}

func (m *modelCosts) at(k modelKey) *ModelCost {
	for i := range *m {
		if (*m)[i].k == k {
			return &(*m)[i].c
		}
	}
	*m = append(*m, struct {
		k modelKey
		c ModelCost
	}{k: k})
	return &(*m)[len(*m)-1].c
}

// costsOf returns what r holds per provider and model (nil for nil).
func costsOf(r *Request) modelCosts {
	if r == nil {
		return nil
	}
	var m modelCosts
	for i := range r.Log {
		e := &r.Log[i]
		c := m.at(modelKey{e.Provider, e.Model})
		if e.Unpriced {
			c.UnpricedBilled += tokens(e.Usage)
		} else {
			c.Billed += e.Cost
		}
		if e.Attempt == r.WinningAttempt {
			if e.Unpriced {
				c.UnpricedUsage += tokens(e.Usage)
			} else {
				c.Usage += e.Cost
			}
		}
	}
	return m
}

// reportCosts tells o of after - before, per provider and model.
func reportCosts(o CostObserver, before, after modelCosts) {
	for _, a := range after {
		d := a.c
		for _, b := range before {
			if b.k == a.k {
				d = ModelCost{d.Usage - b.c.Usage, d.Billed - b.c.Billed, d.UnpricedUsage - b.c.UnpricedUsage, d.UnpricedBilled - b.c.UnpricedBilled}
			}
		}
		if d != (ModelCost{}) {
			o.CostCommitted(a.k.provider, a.k.model, d)
		}
	}
	for _, b := range before {
		gone := true
		for _, a := range after {
			gone = gone && a.k != b.k
		}
		if gone && b.c != (ModelCost{}) {
			o.CostCommitted(b.k.provider, b.k.model, ModelCost{-b.c.Usage, -b.c.Billed, -b.c.UnpricedUsage, -b.c.UnpricedBilled})
		}
	}
}
