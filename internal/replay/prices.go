package replay

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/pricebook"
	"github.com/agentledger/ledger/internal/pricing"
	"github.com/agentledger/ledger/internal/projection"
)

// pricedApply returns the merge a replay folds events by, and the catalog
// version it prices with: o.Apply when set (unversioned), else the
// projection's rule priced with the ledger's recorded catalog (ledger:
// the point-in-time report, which shows the ledger as it is priced) or
// with the current catalog of ledger_prices (!ledger: verify, which shows
// the drift a loaded catalog makes, until a rebuild re-prices).
func (o Options) pricedApply(ctx context.Context, js jetstream.JetStream, ledger bool) (projection.ApplyFunc, string, error) {
	if o.Apply != nil {
		return o.Apply, "", nil
	}
	book, err := pricebook.Lookup(ctx, js, o.Catalog)
	if err != nil {
		return nil, "", err
	}
	v := ""
	if ledger {
		if v, err = projection.LedgerPrices(ctx, js); err != nil {
			return nil, "", err
		}
	}
	if v == "" {
		if v, err = book.Current(ctx); err != nil {
			return nil, "", err
		}
	}
	cat, err := book.Catalog(ctx, v)
	if err != nil {
		return nil, "", err
	}
	return projection.Priced(cat), v, nil
}

// ExplainPrices says, in a few lines for an operator, what a running
// aggregator does with the current catalog when the live ledger prices
// with another (note: adopts it at its next batch when it only adds
// prices from after the latest attempt priced; else keeps the recorded
// version, verify shows the drift and `aggregator rebuild` re-prices),
// and whether this build's default catalog (base, nil: pricing.Default())
// merged with the current user's file makes a new current version when
// an aggregator of this build begins a term (pending; "" when not).
func ExplainPrices(ctx context.Context, js jetstream.JetStream, base *pricing.Catalog) (note, pending string, err error) {
	book, err := pricebook.Lookup(ctx, js, base)
	if err != nil {
		return "", "", err
	}
	ledger, err := projection.LedgerPrices(ctx, js)
	if err != nil {
		return "", "", err
	}
	cur, err := book.Current(ctx)
	if err != nil {
		return "", "", err
	}
	through, err := projection.LedgerPricedThrough(ctx, js)
	if err != nil {
		return "", "", err
	}
	switch {
	case ledger == "":
		note = "the ledger records no catalog yet: the aggregator prices with the current one from its next lease term\n"
	case ledger == cur:
		note = "the ledger prices with the current catalog\n"
	default:
		note = judge(ctx, book, ledger, cur, through)
	}
	v, err := book.Pending(ctx)
	if err != nil {
		return "", "", err
	}
	if v != "" {
		pending = fmt.Sprintf("this build's default catalog, merged with the current user's file if any, is catalog %s, not the current one:\n"+
			"an aggregator of this build stores it and makes it current when its next lease term begins, and judges it as a loaded catalog\n", v)
	}
	return note, pending, nil
}

// judge says what a running aggregator does with the current catalog cur
// of a ledger priced with ledger through the time through.
func judge(ctx context.Context, book *pricebook.Book, ledger, cur string, through time.Time) string {
	prev, err := book.Catalog(ctx, ledger)
	if err != nil {
		return fmt.Sprintf("the ledger prices with catalog %s, which this build cannot load (%v):\n"+
			"an aggregator of this build refuses to write; `aggregator rebuild` re-prices the whole history with the current catalog %s and records it\n", ledger, err, cur)
	}
	next, err := book.Catalog(ctx, cur)
	if err != nil {
		return fmt.Sprintf("the current catalog %s cannot be loaded by this build (%v); the ledger keeps pricing with %s\n", cur, err, ledger)
	}
	if projection.PricedThroughUnknown(through) {
		return fmt.Sprintf("the ledger prices with catalog %s and its checkpoint does not say which attempts it has priced (it was written before priced_through was kept):\n"+
			"it adopts no other catalog until `aggregator rebuild` re-prices the whole history with the current catalog %s and records it (`aggregator verify` shows the drift in money)\n", ledger, cur)
	}
	if pricebook.ForwardOnly(prev, next, through) {
		return fmt.Sprintf("the current catalog %s prices every attempt the ledger has applied as the ledger's catalog %s does (it only adds prices from after %s, the latest attempt priced):\n"+
			"the running aggregator adopts it at its next batch, or its next lease term\n", cur, ledger, through.Format(time.RFC3339))
	}
	return fmt.Sprintf("the current catalog %s changes the price of attempts the ledger has applied (a price rewritten or removed, or one dated on or before %s, the latest attempt priced):\n"+
		"the ledger keeps pricing with catalog %s, never switching mid-history; `aggregator verify` shows the drift in money,\n"+
		"and `aggregator rebuild` re-prices the whole history with the current catalog (the switch records it in the ledger)\n", cur, through.Format(time.RFC3339), ledger)
}
