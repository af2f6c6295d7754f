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
	if l.Applied, err = projection.ReadCheckpoint(ctx, js); err != nil {
		return nil, err
	}
	if s, err := js.Stream(ctx, events.AttemptsStream); err == nil {
		info, err := s.Info(ctx)
		if err != nil {
			return nil, fmt.Errorf("report: reading %s: %w", events.AttemptsStream, err)
		}
		l.StreamLast = info.State.LastSeq
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("report: reading %s: %w", events.AttemptsStream, err)
	}
	kv, err := js.KeyValue(ctx, events.SessionsBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		if sessionID != "" {
			return nil, fmt.Errorf("%w: %q (the ledger is empty)", ErrNoSession, sessionID)
		}
		return l, nil
	}
	if err != nil {
		return nil, fmt.Errorf("report: opening %s: %w", events.SessionsBucket, err)
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
		return nil, fmt.Errorf("report: reading %s: %w", events.SessionsBucket, err)
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
// attempts, retries, status counts, usage in/out, billed in/out and the
// retry overhead (billed minus usage).
func WriteTable(w io.Writer, l *Ledger) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "SESSION\tREQUESTS\tATTEMPTS\tRETRIES\tOK\tFAILED\tPENDING\tUSAGE IN\tUSAGE OUT\tBILLED IN\tBILLED OUT\tOVERHEAD IN\tOVERHEAD OUT\tOVERHEAD %\t")
	row := func(name string, t projection.Totals) {
		o := t.Billed.Sub(t.Usage)
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", name,
			t.Requests, t.Attempts, t.Attempts-t.Requests, t.Succeeded, t.Failed, t.Pending,
			num(t.Usage.InputTokens), num(t.Usage.OutputTokens), num(t.Billed.InputTokens), num(t.Billed.OutputTokens),
			num(o.InputTokens), num(o.OutputTokens), pct(o.InputTokens+o.OutputTokens, t.Usage.InputTokens+t.Usage.OutputTokens))
	}
	for _, s := range l.Sessions {
		row(s.SessionID, s.Totals)
	}
	if len(l.Sessions) != 1 {
		row("TOTAL", l.Total)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	lag := ""
	if l.StreamLast > l.Applied {
		lag = fmt.Sprintf(" (%d events not applied yet)", l.StreamLast-l.Applied)
	}
	noun := "sessions"
	if len(l.Sessions) == 1 {
		noun = "session"
	}
	_, err := fmt.Fprintf(w, "%d %s; applied through stream sequence %d of %d%s.\n", len(l.Sessions), noun, l.Applied, l.StreamLast, lag)
	return err
}

// num writes n with thousands separators.
func num(n int64) string {
	if n < 0 {
		return "-" + progress.Count(uint64(-n))
	}
	return progress.Count(uint64(n))
}

func pct(part, whole int64) string {
	if whole == 0 {
		if part == 0 {
			return "0.0%"
		}
		return "n/a"
	}
	return strconv.FormatFloat(100*float64(part)/float64(whole), 'f', 1, 64) + "%"
}
