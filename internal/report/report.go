package report

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"text/tabwriter"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/pricing"
	"github.com/agentledger/ledger/internal/progress"
	"github.com/agentledger/ledger/internal/projection"
)

// ErrNoSession is returned when a requested session has no record.
var ErrNoSession = errors.New("report: no such session")

// Ledger is the report's input: session rollups and how far the projection
// has got.
type Ledger struct {
	Sessions []projection.SessionView `json:"sessions"`
	Total    projection.Totals        `json:"total"`
	// Applied is the stream sequence the projection has applied up to.
	Applied uint64 `json:"applied_seq"`
	// StreamLast is the last sequence in LEDGER_ATTEMPTS.
	StreamLast uint64 `json:"stream_last_seq"`
}

// Load reads every session (or only sessionID when not empty) from the
// live buckets.
func Load(ctx context.Context, js jetstream.JetStream, sessionID string) (*Ledger, error) {
	l := &Ledger{}
	var err error
	if l.Applied, l.StreamLast, err = position(ctx, js); err != nil {
		return nil, err
	}
	kv, err := js.KeyValue(ctx, names.SessionsBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		if sessionID != "" {
			return nil, fmt.Errorf("%w: %q (the ledger is empty)", ErrNoSession, sessionID)
		}
		return l, nil
	}
	if err != nil {
		return nil, fmt.Errorf("report: opening %s: %w", names.SessionsBucket, err)
	}
	if sessionID != "" {
		if err := events.ValidateID("session", sessionID); err != nil {
			return nil, err
		}
		e, err := kv.Get(ctx, sessionID)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, fmt.Errorf("%w: %q", ErrNoSession, sessionID)
		}
		if err != nil {
			return nil, fmt.Errorf("report: reading session %q: %w", sessionID, err)
		}
		if err := l.add(e.Value()); err != nil {
			return nil, err
		}
		return l, nil
	}
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("report: reading %s: %w", names.SessionsBucket, err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case e := <-w.Updates():
			if e == nil { // the initial values are all delivered
				sort.Slice(l.Sessions, func(i, j int) bool { return l.Sessions[i].SessionID < l.Sessions[j].SessionID })
				return l, nil
			}
			if err := l.add(e.Value()); err != nil {
				return nil, err
			}
		}
	}
}

// position returns the stream sequence the projection has applied up
// to and the last sequence of LEDGER_ATTEMPTS (0 without the stream).
func position(ctx context.Context, js jetstream.JetStream) (applied, last uint64, err error) {
	if applied, err = projection.ReadCheckpoint(ctx, js); err != nil {
		return 0, 0, err
	}
	s, err := js.Stream(ctx, names.AttemptsStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return applied, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("report: reading %s: %w", names.AttemptsStream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("report: reading %s: %w", names.AttemptsStream, err)
	}
	return applied, info.State.LastSeq, nil
}

func (l *Ledger) add(data []byte) error {
	var s projection.Session
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("report: a session record is not readable: %w", err)
	}
	v := s.View()
	l.Sessions = append(l.Sessions, v)
	l.Total = l.Total.Add(v.Totals)
	return nil
}

// WriteJSON writes the ledger as one JSON document.
func WriteJSON(w io.Writer, l *Ledger) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(l)
}

// WriteTable writes one row per session and a total row: requests,
// attempts, retries, status counts, usage in/out, billed in/out, the
// retry overhead (billed minus usage), and the same in money (US dollars,
// each attempt at its own price) with the tokens no price covers
// (billed: the attempts without a price), which the money leaves out;
// then, when some input was estimated
// (projection.Totals.EstimatedInputTokens), a line with it, apart from
// the table. A sum that saturated (see
// projection.Totals) is shown as "≥" and the ceiling, and what is derived
// from it as n/a; a line below the table says so.
func WriteTable(w io.Writer, l *Ledger) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "SESSION\tREQUESTS\tATTEMPTS\tRETRIES\tOK\tFAILED\tPENDING\tUSAGE IN\tUSAGE OUT\tBILLED IN\tBILLED OUT\tOVERHEAD IN\tOVERHEAD OUT\tOVERHEAD %\tUSAGE $\tBILLED $\tOVERHEAD $\tUNPRICED TOKENS\t")
	saturated := 0
	for _, s := range l.Sessions {
		writeRow(tw, s.SessionID, s.Totals)
		if s.Saturated {
			saturated++
		}
	}
	if len(l.Sessions) != 1 {
		writeRow(tw, "TOTAL", l.Total)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	lag := ""
	if l.StreamLast > l.Applied {
		lag = fmt.Sprintf(" (%d events not applied yet)", l.StreamLast-l.Applied)
	}
	_, err := fmt.Fprintf(w, "%d %s; applied through stream sequence %d of %d%s.\n", len(l.Sessions), plural(len(l.Sessions), "session"), l.Applied, l.StreamLast, lag)
	if err == nil {
		err = writeEstimated(w, l)
	}
	if err == nil && l.Total.UnpricedBilledTokens > 0 {
		_, err = fmt.Fprintf(w, "%s billed tokens (input and output) had no price in the ledger's catalog for their provider, model and service tier: the money leaves them out (see `aggregator prices`).\n",
			num(l.Total.UnpricedBilledTokens))
	}
	if err == nil && (saturated > 0 || l.Total.Saturated) {
		msg := "A sum marked ≥ passed " + num(projection.Ceiling) + " (2^63-1) and stopped there: the true sum is larger.\n"
		if saturated > 0 {
			msg = fmt.Sprintf("%d %s saturated. ", saturated, plural(saturated, "session")) + msg
		}
		_, err = io.WriteString(w, msg)
	}
	return err
}

// writeEstimated writes, below the table, the input estimated for
// attempts whose provider never reported it (an OpenAI stream cut before
// its usage): apart from the table's usage and billed, which never
// include it, so that exact and estimated counts do not mix.
func writeEstimated(w io.Writer, l *Ledger) error {
	est, n := l.Total.EstimatedInputTokens, 0
	if est == 0 {
		return nil
	}
	for _, s := range l.Sessions {
		if s.EstimatedInputTokens != 0 {
			n++
		}
	}
	_, err := fmt.Fprintf(w, "Estimated input, not in usage or billed: %s tokens in %d %s (streams cut before the provider reported their input; counted with a tokenizer).\n",
		cells{t: l.Total}.num(est), n, plural(n, "session"))
	return err
}

// writeRow writes the row of one session (or the total).
func writeRow(w io.Writer, name string, t projection.Totals) {
	c := cells{t: t}
	over := []string{"n/a", "n/a", "n/a"}
	if c.exact(t.Billed.InputTokens, t.Billed.OutputTokens, t.Usage.InputTokens, t.Usage.OutputTokens) {
		o := t.Billed.Sub(t.Usage)
		over = []string{num(o.InputTokens), num(o.OutputTokens),
			pct(float64(o.InputTokens)+float64(o.OutputTokens), float64(t.Usage.InputTokens)+float64(t.Usage.OutputTokens))}
	}
	retries := "n/a"
	if c.exact(t.Attempts, t.Requests) {
		retries = num(t.Attempts - t.Requests)
	}
	overCost := "n/a"
	if c.exact(int64(t.UsageCost), int64(t.BilledCost)) {
		overCost = (t.BilledCost - t.UsageCost).String()
	}
	fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", name,
		c.num(t.Requests), c.num(t.Attempts), retries, c.num(t.Succeeded), c.num(t.Failed), c.num(t.Pending),
		c.num(t.Usage.InputTokens), c.num(t.Usage.OutputTokens), c.num(t.Billed.InputTokens), c.num(t.Billed.OutputTokens),
		over[0], over[1], over[2], c.money(t.UsageCost), c.money(t.BilledCost), overCost, c.num(t.UnpricedBilledTokens))
}

// cells formats the numbers of one row: a saturated sum is marked.
type cells struct{ t projection.Totals }

// sat reports whether n is a saturated sum of the row.
func (c cells) sat(n int64) bool { return c.t.Saturated && n == projection.Ceiling }

func (c cells) num(n int64) string {
	if c.sat(n) {
		return "≥" + num(n)
	}
	return num(n)
}

// money writes m in US dollars; a saturated sum is marked.
func (c cells) money(m pricing.Money) string {
	if c.sat(int64(m)) {
		return "≥" + m.String()
	}
	return m.String()
}

// exact reports whether none of ns is a saturated sum.
func (c cells) exact(ns ...int64) bool {
	for _, n := range ns {
		if c.sat(n) {
			return false
		}
	}
	return true
}

func plural(n int, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}

// num writes n with thousands separators.
func num(n int64) string {
	if n < 0 {
		return "-" + progress.Count(uint64(-n))
	}
	return progress.Count(uint64(n))
}

// pct is part of whole in percent; float64, so that sums of large counts
// cannot overflow.
func pct(part, whole float64) string {
	if whole == 0 {
		if part == 0 {
			return "0.0%"
		}
		return "n/a"
	}
	return strconv.FormatFloat(100*part/whole, 'f', 1, 64) + "%"
}
