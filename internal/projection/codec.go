package projection

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/pricing"
)

// The records are written by hand-rolled encoders: encoding/json's
// reflection was a tenth of the aggregator's CPU. The output is plain JSON
// that encoding/json (and any other reader) decodes.
//
// A request record holds the contract fields as the contract shows them,
// then the projection's own fields in a compact form:
//
//	"log":   one array per entry: [attempt, "event_id", flags, input_tokens,
//	         output_tokens, cache_read_input_tokens,
//	         cache_creation_input_tokens, "started_at", "finished_at", cost]
//	         (flags: 1 = outcome success, 2 = final, 4 = unpriced, 8 = the
//	         event's labels differ from the record's; cost in nano-USD), then, only when they differ from the record's
//	         provider and model, two indexes into "names": the entry's
//	         provider and model; then, only when one of them is not 0, an
//	         object of the usage's subsets and the estimate: "c1h"
//	         cache_creation_1h_input_tokens, "rsn" reasoning_tokens, "est"
//	         the attempt's estimated_input_tokens (each only when not 0,
//	         in that order). An entry written before pricing has no cost
//	         (9 or 11 members before the object) and reads as unpriced;
//	"names": present only when an entry refers to it: the distinct
//	         providers and models of those entries, in order of first use,
//	         each written as a name (appendName);
//	"seq":   the batch that last wrote the record;
//	"rules": the RulesVersion of the code that wrote it;
//	"held":  present only when not all zero, as a session's totals;
//	"held_cell": present only when it differs from "held" (read as
//	         "held" when missing), likewise;
//	"held_day", "held_model_hour": present only when they differ from
//	         "held_cell" (read as "held_cell" when missing), likewise.
//
// The contract's fields of issue 20 come after "last_finished_at", each
// only when there is one: "labels" (keys sorted), "label_conflicts",
// "cell" ({"hour","provider","model"}). A rollup record is its cell
// ("grain" when not "hour": "day" or "model_hour"; "hour", "provider",
// "model", "labels"), the session's totals fields, "saturated" when set,
// "seq" and "rules".
//
// The table keeps the record within MaxRequestRecordBytes however many
// attempts name other providers and models (see TestWorstCaseRecordSize).
// Readers also accept the layouts before it: entries without a cost (9 or
// 11 members, read as unpriced: they were written before pricing),
// entries carrying the provider and model strings themselves, and entries
// written as objects, so a ledger projected by older code stays readable.

// MaxRequestRecordBytes bounds the stored form of any request record that
// wire contract v1 allows: 1,001 attempts, each with its own provider and
// model of the longest and most escaped kind, every number at its largest
// (docs/contract.md states it). It leaves room under NATS's default
// max_payload of 1 MiB for the headers of a write.
const MaxRequestRecordBytes = 704 << 10

// entrySuccess and entryFinal are the bits of a compact log entry's flags.
const (
	entrySuccess  = 1
	entryFinal    = 2
	entryUnpriced = 4
	// entryLabelConflict: the event's labels differ from the record's.
	entryLabelConflict = 8
)

// base64Mark starts a name written in base64 (appendName).
const base64Mark = "="

// appendJSON appends the stored form of r.
func (r *Request) appendJSON(b []byte) []byte {
	b = append(b, `{"request_id":`...)
	b = events.AppendString(b, r.RequestID)
	b = append(b, `,"session_id":`...)
	b = events.AppendString(b, r.SessionID)
	b = append(b, `,"provider":`...)
	b = events.AppendString(b, r.Provider)
	b = append(b, `,"model":`...)
	b = events.AppendString(b, r.Model)
	b = append(b, `,"status":`...)
	b = events.AppendString(b, r.Status)
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(r.Attempts), 10)
	b = append(b, `,"winning_attempt":`...)
	b = strconv.AppendInt(b, int64(r.WinningAttempt), 10)
	b = append(b, `,"usage":`...)
	b = events.AppendUsage(b, r.Usage)
	b = append(b, `,"billed":`...)
	b = events.AppendUsage(b, r.Billed)
	b = appendEstimated(b, r.EstimatedInputTokens)
	b = appendMoney(b, r.UsageCost, r.BilledCost, r.UnpricedUsageTokens, r.UnpricedBilledTokens)
	b = append(b, `,"first_started_at":`...)
	b = appendTime(b, r.FirstStartedAt)
	b = append(b, `,"last_finished_at":`...)
	b = appendTime(b, r.LastFinishedAt)
	b = r.appendCell(b)
	b = append(b, `,"log":[`...)
	var names nameTable
	for i := range r.Log {
		if i > 0 {
			b = append(b, ',')
		}
		b = r.appendEntry(b, &r.Log[i], &names)
	}
	b = append(b, ']')
	if len(names.list) > 0 {
		b = append(b, `,"names":[`...)
		for i, s := range names.list {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendName(b, s)
		}
		b = append(b, ']')
	}
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, r.Seq, 10)
	b = append(b, `,"rules":`...)
	b = strconv.AppendInt(b, int64(r.Rules), 10)
	if r.Held != (Totals{}) {
		b = append(b, `,"held":`...)
		b = appendTotals(b, r.Held)
	}
	if r.HeldCell != r.Held {
		b = append(b, `,"held_cell":`...)
		b = appendTotals(b, r.HeldCell)
	}
	if day := r.heldIn(GrainDay); day != r.HeldCell {
		b = append(b, `,"held_day":`...)
		b = appendTotals(b, day)
	}
	if mh := r.heldIn(GrainModelHour); mh != r.HeldCell {
		b = append(b, `,"held_model_hour":`...)
		b = appendTotals(b, mh)
	}
	return append(b, '}')
}

// appendCell appends the record's labels, label_conflicts and cell, the
// contract fields of issue 20: each only when there is one, so that a
// record written before them keeps its layout.
func (r *Request) appendCell(b []byte) []byte {
	if len(r.Labels) > 0 {
		b = append(b, `,"labels":`...)
		b = appendLabels(b, r.Labels)
	}
	if r.LabelConflicts != 0 {
		b = append(b, `,"label_conflicts":`...)
		b = strconv.AppendInt(b, r.LabelConflicts, 10)
	}
	if c := r.Cell; c != nil {
		b = append(b, `,"cell":{"hour":`...)
		b = appendTime(b, c.Hour)
		b = append(b, `,"provider":`...)
		b = events.AppendString(b, c.Provider)
		b = append(b, `,"model":`...)
		b = events.AppendString(b, c.Model)
		b = append(b, '}')
	}
	return b
}

// appendLabels appends l as a JSON object, its keys sorted (as
// json.Marshal writes a map).
func appendLabels(b []byte, l api.Labels) []byte {
	b = append(b, '{')
	for i, k := range slices.Sorted(maps.Keys(l)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = events.AppendString(b, k)
		b = append(b, ':')
		b = events.AppendString(b, l[k])
	}
	return append(b, '}')
}

func (r *Request) appendEntry(b []byte, e *Entry, names *nameTable) []byte {
	flags := 0
	switch e.Outcome {
	case events.OutcomeSuccess:
		flags = entrySuccess
	case events.OutcomeError:
	default: // not a v1 outcome: keep it as it is, in the object layout
		data, _ := json.Marshal(e)
		return append(b, data...)
	}
	if e.Final {
		flags |= entryFinal
	}
	if e.Unpriced {
		flags |= entryUnpriced
	}
	if e.LabelConflict {
		flags |= entryLabelConflict
	}
	b = append(b, '[')
	b = strconv.AppendInt(b, int64(e.Attempt), 10)
	b = append(b, ',')
	b = events.AppendString(b, e.EventID)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(flags), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, e.Usage.InputTokens, 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, e.Usage.OutputTokens, 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, e.Usage.CacheReadInputTokens, 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, e.Usage.CacheCreationInputTokens, 10)
	b = append(b, ',')
	b = appendTime(b, e.StartedAt)
	b = append(b, ',')
	b = appendTime(b, e.FinishedAt)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(e.Cost), 10)
	if e.Provider != r.Provider || e.Model != r.Model {
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(names.id(e.Provider)), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(names.id(e.Model)), 10)
	}
	if u := e.Usage; u.CacheCreation1hInputTokens != 0 || u.ReasoningTokens != 0 || e.EstimatedInput != 0 {
		b = append(b, `,{`...)
		sep := byte(0)
		for _, f := range [...]struct {
			key string
			n   int64
		}{{"c1h", u.CacheCreation1hInputTokens}, {"rsn", u.ReasoningTokens}, {"est", e.EstimatedInput}} {
			if f.n == 0 {
				continue
			}
			if sep != 0 {
				b = append(b, sep)
			}
			sep = ','
			b = append(b, '"')
			b = append(b, f.key...)
			b = append(b, `":`...)
			b = strconv.AppendInt(b, f.n, 10)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// entryExtra is the object that ends a log entry whose usage has subsets,
// or whose input was estimated.
type entryExtra struct {
	CacheCreation1h int64 `json:"c1h"`
	Reasoning       int64 `json:"rsn"`
	Estimated       int64 `json:"est"`
}

// appendEstimated appends the estimated input of a record or totals: a
// member only when there is one, so that records without keep their
// layout.
func appendEstimated(b []byte, n int64) []byte {
	if n == 0 {
		return b
	}
	b = append(b, `,"estimated_input_tokens":`...)
	return strconv.AppendInt(b, n, 10)
}

// nameTable numbers the distinct providers and models of a record's log
// entries, in order of first use.
type nameTable struct {
	list  []string
	index map[string]int
}

// id returns the index of s, adding it when it is new.
func (t *nameTable) id(s string) int {
	if i, ok := t.index[s]; ok {
		return i
	}
	if t.index == nil {
		t.index = make(map[string]int)
	}
	t.index[s] = len(t.list)
	t.list = append(t.list, s)
	return len(t.list) - 1
}

// appendName appends a provider or model name of the table as a JSON
// string: the name itself when JSON needs no escape for it (at most its
// length plus the quotes) and it does not start with base64Mark, else
// base64Mark and the name's bytes in standard base64 (at most 4/3 of its
// length, where escaping could take six times it, and byte for byte).
func appendName(b []byte, s string) []byte {
	n := len(b)
	b = events.AppendString(b, s)
	if len(b)-n == len(s)+2 && !strings.HasPrefix(s, base64Mark) {
		return b
	}
	b = append(b[:n], '"')
	b = append(b, base64Mark...)
	b = base64.StdEncoding.AppendEncode(b, []byte(s))
	return append(b, '"')
}

// decodeName reverses appendName.
func decodeName(s string) (string, error) {
	enc, ok := strings.CutPrefix(s, base64Mark)
	if !ok {
		return s, nil
	}
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return "", fmt.Errorf("name %q: %w", s, err)
	}
	return string(raw), nil
}

// appendJSON appends the stored form of s: the contract fields and seq.
func (s *Session) appendJSON(b []byte) []byte {
	b = append(b, `{"session_id":`...)
	b = events.AppendString(b, s.SessionID)
	return appendSums(b, s.Totals, s.Seq, s.Rules)
}

// appendSums ends the stored form of a session or a rollup: its totals,
// seq and rules.
func appendSums(b []byte, t Totals, seq uint64, rules int) []byte {
	b = append(b, ',')
	b = appendTotalsFields(b, t)
	b = appendSaturated(b, t)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"rules":`...)
	b = strconv.AppendInt(b, int64(rules), 10)
	return append(b, '}')
}

func appendTotals(b []byte, t Totals) []byte {
	b = append(b, '{')
	b = appendTotalsFields(b, t)
	return append(b, '}')
}

func appendTotalsFields(b []byte, t Totals) []byte {
	b = append(b, `"requests":`...)
	b = strconv.AppendInt(b, t.Requests, 10)
	b = append(b, `,"succeeded":`...)
	b = strconv.AppendInt(b, t.Succeeded, 10)
	b = append(b, `,"failed":`...)
	b = strconv.AppendInt(b, t.Failed, 10)
	b = append(b, `,"pending":`...)
	b = strconv.AppendInt(b, t.Pending, 10)
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, t.Attempts, 10)
	b = append(b, `,"usage":`...)
	b = events.AppendUsage(b, t.Usage)
	b = append(b, `,"billed":`...)
	b = events.AppendUsage(b, t.Billed)
	b = appendEstimated(b, t.EstimatedInputTokens)
	b = appendMoney(b, t.UsageCost, t.BilledCost, t.UnpricedUsageTokens, t.UnpricedBilledTokens)
	if t.LabelConflicts != 0 {
		b = append(b, `,"label_conflicts":`...)
		b = strconv.AppendInt(b, t.LabelConflicts, 10)
	}
	return b
}

// appendMoney appends the money members of a record or totals.
func appendMoney(b []byte, usage, billed pricing.Money, unpricedUsage, unpricedBilled int64) []byte {
	b = append(b, `,"usage_cost":`...)
	b = strconv.AppendInt(b, int64(usage), 10)
	b = append(b, `,"billed_cost":`...)
	b = strconv.AppendInt(b, int64(billed), 10)
	b = append(b, `,"unpriced_usage_tokens":`...)
	b = strconv.AppendInt(b, unpricedUsage, 10)
	b = append(b, `,"unpriced_billed_tokens":`...)
	return strconv.AppendInt(b, unpricedBilled, 10)
}

// appendTime appends t as a JSON string in RFC 3339 with nanoseconds, UTC.
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = events.AppendTime(b, t)
	return append(b, '"')
}

// MarshalJSON writes the stored form of r.
func (r *Request) MarshalJSON() ([]byte, error) { return r.appendJSON(nil), nil }

// appendJSON appends the stored form of c: its cell, its totals, seq
// and rules.
func (c *Rollup) appendJSON(b []byte) []byte {
	b = append(b, '{')
	if c.Grain != GrainHour {
		b = append(b, `"grain":"`...)
		b = append(b, grainNames[c.Grain]...)
		b = append(b, `",`...)
	}
	b = append(b, `"hour":`...)
	b = appendTime(b, c.Hour)
	b = append(b, `,"provider":`...)
	b = events.AppendString(b, c.Provider)
	b = append(b, `,"model":`...)
	b = events.AppendString(b, c.Model)
	if len(c.Labels) > 0 {
		b = append(b, `,"labels":`...)
		b = appendLabels(b, c.Labels)
	}
	return appendSums(b, c.Totals, c.Seq, c.Rules)
}

// MarshalJSON writes the stored form of c.
func (c *Rollup) MarshalJSON() ([]byte, error) { return c.appendJSON(nil), nil }

// MarshalJSON writes the stored form of s.
func (s *Session) MarshalJSON() ([]byte, error) { return s.appendJSON(nil), nil }

// UnmarshalJSON reads a stored request record in any of its layouts.
func (r *Request) UnmarshalJSON(data []byte) error {
	var aux struct {
		RequestView
		Log      []json.RawMessage `json:"log"`
		Names    []string          `json:"names"`
		Seq      uint64            `json:"seq"`
		Rules    int               `json:"rules"`
		Held     *Totals           `json:"held"`
		HeldCell *Totals           `json:"held_cell"`
		HeldDay  *Totals           `json:"held_day"`
		HeldMH   *Totals           `json:"held_model_hour"`
	}
	if err := json.Unmarshal(data, &aux); err != nil {
		return err
	}
	*r = Request{RequestView: aux.RequestView, Seq: aux.Seq, Rules: aux.Rules}
	if aux.Held != nil {
		r.Held = *aux.Held
	}
	r.HeldCell = r.Held
	if aux.HeldCell != nil {
		r.HeldCell = *aux.HeldCell
	}
	day, mh := r.HeldCell, r.HeldCell
	if aux.HeldDay != nil {
		day = *aux.HeldDay
	}
	if aux.HeldMH != nil {
		mh = *aux.HeldMH
	}
	r.setHelds(r.HeldCell, day, mh)
	for i, s := range aux.Names {
		name, err := decodeName(s)
		if err != nil {
			return fmt.Errorf("names entry %d: %w", i, err)
		}
		aux.Names[i] = name
	}
	if len(aux.Log) > 0 {
		r.Log = make([]Entry, len(aux.Log))
	}
	for i, raw := range aux.Log {
		if err := r.decodeEntry(raw, aux.Names, &r.Log[i]); err != nil {
			return fmt.Errorf("log entry %d: %w", i, err)
		}
	}
	return nil
}

// decodeEntry reads a log entry: an object, or an array whose provider and
// model are the record's (9 members, 10 with a cost), strings (11, the
// layout before the table) or indexes into names (11, 12 with a cost),
// each possibly followed by the object of the usage's subsets. An entry
// without a cost was written before pricing: it is unpriced.
func (r *Request) decodeEntry(raw json.RawMessage, names []string, e *Entry) error {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 || raw[0] != '[' {
		return json.Unmarshal(raw, e)
	}
	var f []json.RawMessage
	if err := json.Unmarshal(raw, &f); err != nil {
		return err
	}
	if n := len(f); n > 9 {
		last := bytes.TrimLeft(f[n-1], " \t\r\n")
		if len(last) > 0 && last[0] == '{' {
			var x entryExtra
			if err := json.Unmarshal(last, &x); err != nil {
				return fmt.Errorf("usage subsets: %w", err)
			}
			e.Usage.CacheCreation1hInputTokens, e.Usage.ReasoningTokens = x.CacheCreation1h, x.Reasoning
			e.EstimatedInput = x.Estimated
			f = f[:n-1]
		}
	}
	if len(f) < 9 || len(f) > 12 {
		return fmt.Errorf("%d members, want 9 to 12 and the object of the usage's subsets", len(f))
	}
	priced := len(f)%2 == 0 // 10 or 12: the cost follows finished_at
	if priced {
		if err := json.Unmarshal(f[9], &e.Cost); err != nil {
			return fmt.Errorf("cost: %w", err)
		}
		f = append(f[:9:9], f[10:]...)
	}
	var flags int
	targets := []any{&e.Attempt, &e.EventID, &flags, &e.Usage.InputTokens, &e.Usage.OutputTokens,
		&e.Usage.CacheReadInputTokens, &e.Usage.CacheCreationInputTokens, &e.StartedAt, &e.FinishedAt}
	for i, v := range f[:9] {
		if err := json.Unmarshal(v, targets[i]); err != nil {
			return err
		}
	}
	if flags&^(entrySuccess|entryFinal|entryUnpriced|entryLabelConflict) != 0 {
		return fmt.Errorf("unknown flags %d", flags)
	}
	e.Unpriced = !priced || flags&entryUnpriced != 0
	e.Outcome = events.OutcomeError
	if flags&entrySuccess != 0 {
		e.Outcome = events.OutcomeSuccess
	}
	e.Final = flags&entryFinal != 0
	e.LabelConflict = flags&entryLabelConflict != 0
	e.Provider, e.Model = r.Provider, r.Model
	if len(f) == 11 {
		var err error
		if e.Provider, err = nameAt(f[9], names); err != nil {
			return fmt.Errorf("provider: %w", err)
		}
		if e.Model, err = nameAt(f[10], names); err != nil {
			return fmt.Errorf("model: %w", err)
		}
	}
	return nil
}

// nameAt reads an entry's provider or model: a string, or an index into
// names.
func nameAt(raw json.RawMessage, names []string) (string, error) {
	var s string
	if len(raw) > 0 && raw[0] == '"' {
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var i int
	if err := json.Unmarshal(raw, &i); err != nil {
		return "", err
	}
	if i < 0 || i >= len(names) {
		return "", fmt.Errorf("index %d outside the %d names", i, len(names))
	}
	return names[i], nil
}
