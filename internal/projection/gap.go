package projection

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/names"
)

// ErrGap is matched (errors.Is) by every *GapError.
var ErrGap = errors.New("projection: events missing from the stream")

// GapError means LEDGER_ATTEMPTS no longer holds events the ledger has not
// applied: the first event the aggregator is given is past its checkpoint
// + 1, or the stream's first sequence is. Their usage would be missing
// from the ledger without a word, so the aggregator stops instead. Events
// From through To are gone.
type GapError struct {
	From, To uint64
	// Checkpoint is the ledger's checkpoint when the gap was found.
	Checkpoint uint64
}

func (e *GapError) Error() string {
	return fmt.Sprintf("projection: %s no longer holds events %d to %d (%d events), which the ledger has not applied (its checkpoint is %d): "+
		"the stream's retention (MaxAge, MaxMsgs, MaxBytes) or a purge removed them, and their usage would be missing from the ledger. "+
		"To recover, restore %s from a backup that holds them and start the aggregator again; "+
		"or accept the loss: `aggregator rebuild --accept-loss` rebuilds the ledger from the events that are left and records the lost range in %s key %q",
		names.AttemptsStream, e.From, e.To, e.To-e.From+1, e.Checkpoint, names.AttemptsStream, names.StateBucket, names.LossKey)
}

// Is makes errors.Is(err, ErrGap) true.
func (e *GapError) Is(target error) bool { return target == ErrGap }

// Events is how many events the gap misses.
func (e *GapError) Events() uint64 { return e.To - e.From + 1 }

// gap handles a gap found in term t's input: events from through to are
// missing. It returns a *GapError, unless Config.AcceptGap accepts it (a
// rebuild with --accept-loss), which records the loss.
func (a *Aggregator) gap(from, to, cp uint64) error {
	a.stats.gap.Store(to - from + 1)
	if a.cfg.AcceptGap == nil {
		return &GapError{From: from, To: to, Checkpoint: cp}
	}
	if err := a.cfg.AcceptGap(from, to); err != nil {
		return fmt.Errorf("projection: accepting the loss of events %d to %d: %w", from, to, err)
	}
	a.log.Warn("aggregator: events are missing from the stream; their loss is accepted and recorded",
		"from", from, "to", to, "events", to-from+1)
	return nil
}

// checkHead refuses to start a term at checkpoint cp when the stream's
// first event is past cp+1.
func (a *Aggregator) checkHead(ctx context.Context, res *resources, cp uint64) error {
	info, err := res.stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("projection: reading %s: %w", names.AttemptsStream, err)
	}
	if first := info.State.FirstSeq; first > cp+1 {
		return a.gap(cp+1, first-1, cp)
	}
	return nil
}

// LossRange is a range of stream sequences whose events a rebuild run
// with --accept-loss found gone from LEDGER_ATTEMPTS and left out of the
// ledger it rebuilt.
type LossRange struct {
	From uint64 `json:"from"`
	To   uint64 `json:"to"`
	// RecordedAt is when the loss was first recorded; By names the rebuild.
	RecordedAt time.Time `json:"recorded_at"`
	By         string    `json:"by"`
}

// lossRecord is the value of names.LossKey in ledger_state.
type lossRecord struct {
	Ranges []LossRange `json:"ranges"`
}

// add merges r into the record's ranges (sorted, disjoint, not adjacent)
// and reports whether anything changed.
func (l *lossRecord) add(r LossRange) bool {
	for _, have := range l.Ranges {
		if have.From <= r.From && r.To <= have.To {
			return false
		}
	}
	rs := append(l.Ranges, r)
	slices.SortFunc(rs, func(a, b LossRange) int { return cmp.Compare(a.From, b.From) })
	out := rs[:1]
	for _, x := range rs[1:] {
		last := &out[len(out)-1]
		if x.From <= last.To+1 {
			last.To = max(last.To, x.To)
			continue
		}
		out = append(out, x)
	}
	l.Ranges = out
	return true
}

// recordLoss adds r to the loss record in state (compare-and-set, retried
// on a concurrent write).
func recordLoss(ctx context.Context, state jetstream.KeyValue, r LossRange) error {
	for {
		var rec lossRecord
		var rev uint64
		e, err := state.Get(ctx, names.LossKey)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return fmt.Errorf("projection: reading the loss record: %w", err)
		default:
			if err := json.Unmarshal(e.Value(), &rec); err != nil {
				return fmt.Errorf("%w: the loss record %q is not readable: %v", ErrInvariant, e.Value(), err)
			}
			rev = e.Revision()
		}
		if !rec.add(r) {
			return nil
		}
		if rev == 0 {
			_, err = state.Create(ctx, names.LossKey, mustJSON(rec))
		} else {
			_, err = state.Update(ctx, names.LossKey, mustJSON(rec), rev)
		}
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("projection: recording the loss of events %d to %d: %w", r.From, r.To, err)
		}
	}
}

// ReadLoss returns the ranges of events the live ledger was rebuilt
// without (see LossRange); none when no loss was ever accepted.
func ReadLoss(ctx context.Context, js jetstream.JetStream) ([]LossRange, error) {
	state, err := js.KeyValue(ctx, names.StateBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("projection: opening %s: %w", names.StateBucket, err)
	}
	e, err := state.Get(ctx, names.LossKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("projection: reading the loss record: %w", err)
	}
	var rec lossRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return nil, fmt.Errorf("%w: the loss record %q is not readable: %v", ErrInvariant, e.Value(), err)
	}
	return rec.Ranges, nil
}

// LossCovers reports whether ranges cover every sequence from 1 through
// to.
func LossCovers(ranges []LossRange, to uint64) bool {
	next := uint64(1)
	for _, r := range ranges {
		if next > to {
			return true
		}
		if r.From > next {
			return false
		}
		next = max(next, r.To+1)
	}
	return next > to
}
