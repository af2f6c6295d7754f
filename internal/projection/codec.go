package projection

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/agentledger/ledger/internal/events"
)

// The records are written by hand-rolled encoders: encoding/json's
// reflection was a tenth of the aggregator's CPU. The output is plain JSON
// that encoding/json (and any other reader) decodes.
//
// A request record holds the contract fields as the contract shows them,
// then the projection's own fields in a compact form:
//
//	"log":  one array per entry: [attempt, "event_id", flags, input_tokens,
//	        output_tokens, cache_read_input_tokens,
//	        cache_creation_input_tokens, "started_at", "finished_at"] and,
//	        only when they differ from the record's provider and model,
//	        "provider", "model" (flags: 1 = outcome success, 2 = final);
//	"seq":  the batch that last wrote the record;
//	"held": present only when not all zero, as a session's totals.
//
// Readers also accept log entries written as objects (the layout before
// the compact one), so a ledger projected by older code stays readable.

// entrySuccess and entryFinal are the bits of a compact log entry's flags.
const (
	entrySuccess = 1
	entryFinal   = 2
)

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
	b = append(b, `,"first_started_at":`...)
	b = appendTime(b, r.FirstStartedAt)
	b = append(b, `,"last_finished_at":`...)
	b = appendTime(b, r.LastFinishedAt)
	b = append(b, `,"log":[`...)
	for i := range r.Log {
		if i > 0 {
			b = append(b, ',')
		}
		b = r.appendEntry(b, &r.Log[i])
	}
	b = append(b, `],"seq":`...)
	b = strconv.AppendUint(b, r.Seq, 10)
	if r.Held != (Totals{}) {
		b = append(b, `,"held":`...)
		b = appendTotals(b, r.Held)
	}
	return append(b, '}')
}

func (r *Request) appendEntry(b []byte, e *Entry) []byte {
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
	if e.Provider != r.Provider || e.Model != r.Model {
		b = append(b, ',')
		b = events.AppendString(b, e.Provider)
		b = append(b, ',')
		b = events.AppendString(b, e.Model)
	}
	return append(b, ']')
}

// appendJSON appends the stored form of s: the contract fields and seq.
func (s *Session) appendJSON(b []byte) []byte {
	b = append(b, `{"session_id":`...)
	b = events.AppendString(b, s.SessionID)
	b = append(b, ',')
	b = appendTotalsFields(b, s.Totals)
	b = appendSaturated(b, s.Totals)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, s.Seq, 10)
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
	return events.AppendUsage(b, t.Billed)
}

// appendTime appends t as a JSON string in RFC 3339 with nanoseconds, UTC.
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = events.AppendTime(b, t)
	return append(b, '"')
}

// MarshalJSON writes the stored form of r.
func (r *Request) MarshalJSON() ([]byte, error) { return r.appendJSON(nil), nil }

// MarshalJSON writes the stored form of s.
func (s *Session) MarshalJSON() ([]byte, error) { return s.appendJSON(nil), nil }

// UnmarshalJSON reads a stored request record, with its log in either
// layout.
func (r *Request) UnmarshalJSON(data []byte) error {
	var aux struct {
		RequestView
		Log  []json.RawMessage `json:"log"`
		Seq  uint64            `json:"seq"`
		Held *Totals           `json:"held"`
	}
	if err := json.Unmarshal(data, &aux); err != nil {
		return err
	}
	*r = Request{RequestView: aux.RequestView, Seq: aux.Seq}
	if aux.Held != nil {
		r.Held = *aux.Held
	}
	if len(aux.Log) > 0 {
		r.Log = make([]Entry, len(aux.Log))
	}
	for i, raw := range aux.Log {
		if err := r.decodeEntry(raw, &r.Log[i]); err != nil {
			return fmt.Errorf("log entry %d: %w", i, err)
		}
	}
	return nil
}

func (r *Request) decodeEntry(raw json.RawMessage, e *Entry) error {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 || raw[0] != '[' {
		return json.Unmarshal(raw, e)
	}
	var f []json.RawMessage
	if err := json.Unmarshal(raw, &f); err != nil {
		return err
	}
	if len(f) != 9 && len(f) != 11 {
		return fmt.Errorf("%d members, want 9 or 11", len(f))
	}
	var flags int
	targets := []any{&e.Attempt, &e.EventID, &flags, &e.Usage.InputTokens, &e.Usage.OutputTokens,
		&e.Usage.CacheReadInputTokens, &e.Usage.CacheCreationInputTokens, &e.StartedAt, &e.FinishedAt,
		&e.Provider, &e.Model}
	for i, v := range f {
		if err := json.Unmarshal(v, targets[i]); err != nil {
			return err
		}
	}
	if flags&^(entrySuccess|entryFinal) != 0 {
		return fmt.Errorf("unknown flags %d", flags)
	}
	e.Outcome = events.OutcomeError
	if flags&entrySuccess != 0 {
		e.Outcome = events.OutcomeSuccess
	}
	e.Final = flags&entryFinal != 0
	if len(f) == 9 {
		e.Provider, e.Model = r.Provider, r.Model
	}
	return nil
}
