package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentledger/ledger/internal/pricing"
	"github.com/agentledger/ledger/internal/projection"
)

// Columns are the names of the measure columns of --json and --csv, in
// order, after one column per dimension (named as --by spells it). They
// are stable: scripts may rely on them. Money is given twice, as an
// integer of nano-US-dollars (_nano_usd) and as a decimal string of
// dollars (_usd), never as a float. A derived column (retries, the token
// sums and the overheads) is null in JSON and empty in CSV when
// saturated is true (some sum stopped at 2^63-1).
var Columns = []string{
	"requests", "attempts", "retries",
	"usage_tokens", "billed_tokens", "overhead_tokens",
	"usage_cost_nano_usd", "usage_cost_usd",
	"billed_cost_nano_usd", "billed_cost_usd",
	"overhead_cost_nano_usd", "overhead_cost_usd",
	"unpriced_billed_tokens", "label_conflicts", "saturated",
}

// field is one cell of a row: its text, and how JSON writes it.
type field struct {
	text string
	kind byte // 'n' number, 's' string, 'b' bool, '-' unknown (null)
}

// fields are m's values in the order of Columns.
func (m Measures) fields() []field {
	n := func(v int64) field { return field{strconv.FormatInt(v, 10), 'n'} }
	derived := func(f field) field {
		if m.Saturated {
			return field{kind: '-'}
		}
		return f
	}
	money := func(v pricing.Money, d bool) []field {
		fs := []field{n(int64(v)), {v.String(), 's'}}
		if d {
			fs[0], fs[1] = derived(fs[0]), derived(fs[1])
		}
		return fs
	}
	fs := []field{n(m.Requests), n(m.Attempts), derived(n(m.Retries)),
		derived(n(m.UsageTokens)), derived(n(m.BilledTokens)), derived(n(m.OverheadTokens))}
	fs = append(fs, money(m.UsageCost, false)...)
	fs = append(fs, money(m.BilledCost, false)...)
	fs = append(fs, money(m.OverheadCost, true)...)
	return append(fs, n(m.UnpricedBilledTokens), n(m.LabelConflicts), field{strconv.FormatBool(m.Saturated), 'b'})
}

// dimFields are the values of a row's dimensions: a missing label is
// unknown (null in JSON, empty in CSV).
func dimFields(vs []string) []field {
	fs := make([]field, len(vs))
	for i, v := range vs {
		fs[i] = field{v, 's'}
		if v == "" {
			fs[i].kind = '-'
		}
	}
	return fs
}

// header is the column names of r's rows.
func (r *Result) header() []string {
	h := make([]string, 0, len(r.Query.By)+len(Columns))
	for _, d := range r.Query.By {
		h = append(h, d.String())
	}
	return append(h, Columns...)
}

// WriteCSV writes r as CSV: a header (the dimensions, then Columns), then
// one line per row; no total line.
func WriteCSV(w io.Writer, r *Result) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(r.header()); err != nil {
		return err
	}
	rec := make([]string, 0, len(r.Query.By)+len(Columns))
	for _, row := range r.Rows {
		rec = rec[:0]
		for _, f := range append(dimFields(row.Values), row.fields()...) {
			rec = append(rec, f.text)
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteRowsJSON writes r as one JSON document: the query (by, source,
// for the rollups the grain that answered: "hour", "day" or "model_hour",
// since, until, sort, top), groups, rows (objects with the columns of
// WriteCSV), total (the measures of every group, --top or not) and the
// applied and last stream sequences.
func WriteRowsJSON(w io.Writer, r *Result) error {
	var b bytes.Buffer
	by, _ := json.Marshal(r.header()[:len(r.Query.By)])
	fmt.Fprintf(&b, "{\n  \"by\": %s,\n  \"source\": %q,\n", by, r.Source)
	if r.Source == FromRollups {
		fmt.Fprintf(&b, "  \"grain\": %q,\n", r.Grain)
	}
	for _, t := range []struct {
		name string
		t    time.Time
	}{{"since", r.Query.Since}, {"until", r.Query.Until}} {
		if !t.t.IsZero() {
			fmt.Fprintf(&b, "  %q: %q,\n", t.name, t.t.Format(time.RFC3339))
		}
	}
	if r.Query.Sort != SortNone {
		fmt.Fprintf(&b, "  \"sort\": %q,\n", r.Query.Sort)
	}
	if r.Query.Top > 0 {
		fmt.Fprintf(&b, "  \"top\": %d,\n", r.Query.Top)
	}
	fmt.Fprintf(&b, "  \"groups\": %d,\n  \"rows\": [", r.Groups)
	h := r.header()
	for i, row := range r.Rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n    ")
		writeObject(&b, h, append(dimFields(row.Values), row.fields()...))
	}
	if len(r.Rows) > 0 {
		b.WriteString("\n  ")
	}
	b.WriteString("],\n  \"total\": ")
	writeObject(&b, Columns, r.Total.fields())
	fmt.Fprintf(&b, ",\n  \"applied_seq\": %d,\n  \"stream_last_seq\": %d\n}\n", r.Applied, r.StreamLast)
	_, err := w.Write(b.Bytes())
	return err
}

// writeObject writes one JSON object of names and fields, on one line.
func writeObject(b *bytes.Buffer, names []string, fs []field) {
	b.WriteByte('{')
	for i, f := range fs {
		if i > 0 {
			b.WriteString(", ")
		}
		name, _ := json.Marshal(names[i])
		b.Write(name)
		b.WriteString(": ")
		switch f.kind {
		case 'n', 'b':
			b.WriteString(f.text)
		case '-':
			b.WriteString("null")
		default:
			s, _ := json.Marshal(f.text)
			b.Write(s)
		}
	}
	b.WriteByte('}')
}

// WriteRowsTable writes r for people: a column per dimension, then
// requests, attempts, retries, usage, billed and overhead tokens, the
// overhead in percent of usage, usage, billed and overhead in US dollars,
// the billed tokens without a price and the label conflicts; a TOTAL row
// (every group, --top or not); then a line saying what was read and how
// many groups there are, and notes on "(none)", the unpriced tokens and
// the label conflicts when there are any.
func WriteRowsTable(w io.Writer, r *Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	h := r.header()[:len(r.Query.By)]
	for i := range h {
		h[i] = strings.ToUpper(h[i])
	}
	fmt.Fprintf(tw, "%s\tREQUESTS\tATTEMPTS\tRETRIES\tUSAGE TOKENS\tBILLED TOKENS\tOVERHEAD TOKENS\tOVERHEAD %%\tUSAGE $\tBILLED $\tOVERHEAD $\tUNPRICED TOKENS\tLABEL CONFLICTS\t\n", strings.Join(h, "\t"))
	none, saturated := false, false
	for _, row := range r.Rows {
		vs := make([]string, len(row.Values))
		for i, v := range row.Values {
			if vs[i] = v; v == "" {
				vs[i], none = NoLabel, true
			}
		}
		writeMeasures(tw, strings.Join(vs, "\t"), row.Measures)
		saturated = saturated || row.Saturated
	}
	writeMeasures(tw, "TOTAL"+strings.Repeat("\t", len(h)-1), r.Total)
	if err := tw.Flush(); err != nil {
		return err
	}
	var b strings.Builder
	shown := fmt.Sprintf("%d %s", r.Groups, plural(r.Groups, "group"))
	if len(r.Rows) < r.Groups {
		shown = fmt.Sprintf("%d of %d groups", len(r.Rows), r.Groups)
	}
	order := "by " + dimList(r.Query.By)
	if r.Query.Sort != SortNone {
		order = "by " + string(r.Query.Sort) + ", most first"
	}
	fmt.Fprintf(&b, "%s, %s, from the %s%s; applied through stream sequence %d of %d%s.\n",
		shown, order, r.sourceNote(), rangeNote(r.Query), r.Applied, r.StreamLast, lagNote(r.Applied, r.StreamLast))
	if none {
		fmt.Fprintf(&b, "%s: requests without that label.\n", NoLabel)
	}
	if r.Groups == 0 && r.Source == FromRollups && r.Applied > 0 {
		b.WriteString("No rollup in range. A ledger projected before the rollups existed has none until `aggregator rebuild`.\n")
	}
	if r.Source == FromRollups && r.Coarser != r.Grain {
		fmt.Fprintf(&b, "The ledger was projected before its rollups per day and per model-hour existed, so the hour cells answered; after `aggregator rebuild` the %s cells answer this (fewer records to read).\n", r.Coarser)
	}
	if r.Total.UnpricedBilledTokens > 0 {
		fmt.Fprintf(&b, "%s billed tokens had no price in the ledger's catalog: the money leaves them out (see `aggregator prices`).\n", num(r.Total.UnpricedBilledTokens))
	}
	if r.Total.LabelConflicts > 0 {
		fmt.Fprintf(&b, "%s accepted %s carried labels other than their request's first: counted in their request's cell, their labels ignored.\n",
			num(r.Total.LabelConflicts), plural(int(min(r.Total.LabelConflicts, 2)), "event"))
	}
	if saturated || r.Total.Saturated {
		fmt.Fprintf(&b, "A row with n/a has a sum that passed %s (2^63-1) and stopped there.\n", num(1<<63-1))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

var sourceNote = map[Source]string{
	FromSessions: "session records (each session's whole life)",
	FromRequests: "request records (every one scanned)",
}

// grainNote says what one rollup record of each grain sums.
var grainNote = map[projection.Grain]string{
	projection.GrainHour:      "per hour, provider, model and labels",
	projection.GrainDay:       "per day, provider, model and labels",
	projection.GrainModelHour: "per hour, provider and model",
}

// sourceNote names the records that answered: for the rollups, their
// grain and how many were read.
func (r *Result) sourceNote() string {
	if r.Source != FromRollups {
		return sourceNote[r.Source]
	}
	return fmt.Sprintf("rollups (%s records, one %s)", num(int64(r.Cells)), grainNote[r.Grain])
}

func rangeNote(q Query) string {
	switch {
	case q.Since.IsZero() && q.Until.IsZero():
		return ""
	case q.Until.IsZero():
		return ", hours from " + q.Since.Format(time.RFC3339)
	case q.Since.IsZero():
		return ", hours before " + q.Until.Format(time.RFC3339)
	}
	return ", hours from " + q.Since.Format(time.RFC3339) + " to before " + q.Until.Format(time.RFC3339)
}

func lagNote(applied, last uint64) string {
	if last > applied {
		return fmt.Sprintf(" (%d events not applied yet)", last-applied)
	}
	return ""
}

// writeMeasures writes one row of the table after its leading cells.
func writeMeasures(w io.Writer, lead string, m Measures) {
	d := func(s string) string {
		if m.Saturated {
			return "n/a"
		}
		return s
	}
	fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", lead,
		num(m.Requests), num(m.Attempts), d(num(m.Retries)),
		d(num(m.UsageTokens)), d(num(m.BilledTokens)), d(num(m.OverheadTokens)),
		d(pct(float64(m.OverheadTokens), float64(m.UsageTokens))),
		m.UsageCost.String(), m.BilledCost.String(), d(m.OverheadCost.String()),
		num(m.UnpricedBilledTokens), num(m.LabelConflicts))
}
