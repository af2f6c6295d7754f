package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"text/tabwriter"

	"github.com/agentledger/ledger/internal/cli"
	"github.com/agentledger/ledger/internal/pricing"
	"github.com/agentledger/ledger/internal/progress"
	"github.com/agentledger/ledger/internal/replay"
)

// verifyCmd recomputes the ledger from the stream and compares it with the
// live buckets and rejections, in bounded memory. Exit 0: identical; 1:
// drift; 2: error.
func verifyCmd(ctx context.Context, args []string, stdout, stderr io.Writer, o replay.Options) (err error) {
	fs := newFlagSet("verify", stderr)
	var cf connFlags
	cf.register(fs)
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	limit := fs.Int("limit", 100, "print at most this many differences (0: all); the summary counts all")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return cli.Said
	}
	if *limit < 0 {
		return fmt.Errorf("--limit: %d must not be negative", *limit)
	}
	limitVerifyMemory()
	conn, err := cf.open("ledger-verify")
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, unguard := guard(ctx, conn, &err)
	defer unguard()
	meter := progress.New(stderr, "verify", progress.Options{})
	o.Progress = meter.Update
	o.MaxDiffs = *limit
	d, err := replay.Verify(ctx, conn.JS, o)
	meter.Finish()
	if err != nil {
		return err
	}
	if *asJSON {
		err = writeDriftJSON(stdout, d, *limit)
	} else {
		err = writeDriftTable(stdout, d, *limit)
	}
	if err != nil {
		return err
	}
	if !d.Identical() {
		return &cli.ExitError{Code: cli.ExitFailed}
	}
	return nil
}

func writeDriftJSON(w io.Writer, d *replay.Drift, limit int) error {
	out := struct {
		*replay.Drift
		Identical bool `json:"identical"`
		Omitted   int  `json:"differences_omitted"`
	}{Drift: d, Identical: d.Identical(), Omitted: d.DiffCount - len(d.Diffs)}
	if limit > 0 && len(d.Diffs) > limit {
		c := *d
		c.Diffs = d.Diffs[:limit]
		out.Drift, out.Omitted = &c, d.DiffCount-limit
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// writeDriftTable prints one row per differing field, then the summary.
func writeDriftTable(w io.Writer, d *replay.Drift, limit int) error {
	if len(d.Diffs) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "KIND\tID\tFIELD\tLIVE\tRECOMPUTED\tDELTA\tAT SEQ")
		for i, df := range d.Diffs {
			if limit > 0 && i == limit {
				break
			}
			delta := ""
			if df.Delta != nil {
				delta = signed(*df.Delta)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\n", df.Kind, df.ID, df.Field, df.Live, df.Recomputed, delta, df.Seq)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if shown := min(len(d.Diffs), max(limit, 0)); limit > 0 && d.DiffCount > shown {
			fmt.Fprintf(w, "... %d more differences (--limit 0 prints all)\n", d.DiffCount-shown)
		}
	}
	verdict := "identical"
	if !d.Identical() {
		verdict = fmt.Sprintf("%s, %s, %s and %s differ; live minus recomputed: usage %s tokens, billed %s tokens; in money: usage %s, billed %s USD, unpriced %s tokens",
			plural(d.SessionsDiffer, "session"), plural(d.RollupsDiffer, "rollup"), plural(d.RequestsDiffer, "request"), plural(d.RejectionsDiffer, "rejection"),
			signed(d.UsageTokenDelta), signed(d.BilledTokenDelta), signedMoney(d.UsageCostDelta), signedMoney(d.BilledCostDelta),
			signed(d.UnpricedTokenDelta))
	}
	if d.Prices != "" && d.Prices != d.LedgerPrices {
		fmt.Fprintf(w, "recomputed with the current price catalog %s; the ledger prices with %s\n", d.Prices, orNone(d.LedgerPrices))
		fmt.Fprint(w, d.PricesNote)
	}
	fmt.Fprint(w, d.DefaultPricesNote)
	_, err := fmt.Fprintf(w, "checked %s, %s, %s and %s at live checkpoint %d: %s\n",
		plural(d.SessionsChecked, "session"), plural(d.RollupsChecked, "rollup"), plural(d.RequestsChecked, "request"), plural(d.RejectionsChecked, "rejection"),
		d.Checkpoint, verdict)
	return err
}

// limitVerifyMemory sets verify's soft memory limit (replay.MemoryLimit),
// unless GOMEMLIMIT sets one: verify's working set is bounded, and the
// limit keeps the garbage collector from letting the heap double it.
func limitVerifyMemory() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(replay.MemoryLimit)
	}
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return progress.Count(uint64(n)) + " " + what + "s"
}

// signedMoney writes m in US dollars with its sign.
func signedMoney(m pricing.Money) string {
	if m > 0 {
		return "+" + m.String()
	}
	return m.String()
}

// signed writes n with its sign and thousands separators.
func signed(n int64) string {
	switch {
	case n > 0:
		return "+" + progress.Count(uint64(n))
	case n < 0:
		return "-" + progress.Count(uint64(-n))
	}
	return "0"
}
