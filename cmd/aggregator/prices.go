package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/cli"
	"github.com/agentledger/ledger/internal/pricebook"
	"github.com/agentledger/ledger/internal/projection"
	"github.com/agentledger/ledger/internal/replay"
	"github.com/agentledger/ledger/internal/topology"
)

// maxCatalogBytes bounds a catalog file: it is stored as one KV value.
const maxCatalogBytes = 512 << 10

// pricesCmd lists the price catalogs of ledger_prices (aggregator prices)
// or loads one (aggregator prices load FILE).
func pricesCmd(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	load := len(args) > 0 && args[0] == "load"
	if load {
		args = args[1:]
	}
	fs := newFlagSet("prices", stderr)
	var cf connFlags
	cf.register(fs)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	var file []byte
	var name string
	if load {
		if fs.NArg() != 1 {
			return fmt.Errorf("prices load: give one catalog FILE (a JSON file as internal/pricing documents it)")
		}
		name = fs.Arg(0)
		if file, err = readCatalog(name); err != nil {
			return err
		}
	} else if fs.NArg() > 0 {
		return fmt.Errorf("prices: unexpected %q (did you mean `aggregator prices load FILE`?)", fs.Arg(0))
	}
	conn, err := cf.open("ledger-prices")
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, unguard := guard(ctx, conn, &err)
	defer unguard()
	book, err := pricebook.Open(ctx, conn.JS, topology.Config{}, nil)
	if err != nil {
		return err
	}
	ledger, err := projection.LedgerPrices(ctx, conn.JS)
	if err != nil {
		return err
	}
	if load {
		cat, err := book.Load(ctx, file, name, time.Now())
		if err != nil {
			return fmt.Errorf("prices load %s: %w", name, err)
		}
		fmt.Fprintf(stdout, "loaded %s: catalog %s (%d entries) is now the current catalog\n", name, cat.Version(), cat.Len())
		return explainPrices(ctx, conn.JS, stdout)
	}
	entries, current, err := book.List(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "ledger:  %s\ncurrent: %s\n", orNone(ledger), current)
	if err := explainPrices(ctx, conn.JS, stdout); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tSTORED\tFILE\tBYTES\tFORM\t")
	fmt.Fprintf(tw, "%s\t(built in)\t(default catalog of this build)\t-\t-\t\n", book.Default().Version())
	for _, e := range entries {
		form := "resolved"
		if len(e.Catalog) == 0 {
			form = "old (file only: priced only by a build whose default made it)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t\n", e.Version, e.LoadedAt.Format(time.RFC3339), e.Name, len(e.File), form)
	}
	return tw.Flush()
}

// explainPrices prints what the aggregator does with the current catalog
// (replay.ExplainPrices).
func explainPrices(ctx context.Context, js jetstream.JetStream, w io.Writer) error {
	note, pending, err := replay.ExplainPrices(ctx, js, nil)
	if err != nil {
		return err
	}
	_, err = fmt.Fprint(w, note, pending)
	return err
}

func orNone(s string) string {
	if s == "" {
		return "(none recorded yet)"
	}
	return s
}

// readCatalog reads a catalog file, refusing one too large to store.
func readCatalog(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxCatalogBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxCatalogBytes {
		return nil, fmt.Errorf("prices load: %s is larger than %d bytes", name, maxCatalogBytes)
	}
	return data, nil
}
