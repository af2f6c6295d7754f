package replay

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/pricebook"
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
