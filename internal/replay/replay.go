package replay

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/projection"
	"github.com/agentledger/ledger/internal/report"
)

// ErrInvalidPoint is returned for a point in time that names nothing.
var ErrInvalidPoint = errors.New("replay: invalid point in time")

// Point says where the replay stops: at stream sequence Seq (inclusive), or
// at the last event stored at or before At. Exactly one is set.
type Point struct {
	Seq uint64
	At  time.Time
}

// Ledger recomputes the session rollups from the stream's events up to p.
func Ledger(ctx context.Context, js jetstream.JetStream, p Point) (*report.Ledger, error) {
	if (p.Seq == 0) == p.At.IsZero() {
		return nil, fmt.Errorf("%w: give exactly one of a sequence (at least 1) or a time", ErrInvalidPoint)
	}
	stream, err := js.Stream(ctx, events.AttemptsStream)
	if err != nil {
		return nil, fmt.Errorf("replay: opening %s: %w", events.AttemptsStream, err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("replay: reading %s: %w", events.AttemptsStream, err)
	}
	last := info.State.LastSeq
	if p.Seq > 0 && p.Seq < last {
		last = p.Seq
	}
	reqs := map[string]*projection.Request{}
	var upTo uint64
	if last > 0 && info.State.Msgs > 0 {
		cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{events.AttemptsSubjects}})
		if err != nil {
			return nil, fmt.Errorf("replay: reading %s: %w", events.AttemptsStream, err)
		}
		it, err := cons.Messages(jetstream.PullMaxMessages(10_000))
		if err != nil {
			return nil, fmt.Errorf("replay: reading %s: %w", events.AttemptsStream, err)
		}
		defer it.Stop()
		for upTo < last {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			m, err := it.Next()
			if err != nil {
				return nil, fmt.Errorf("replay: reading %s: %w", events.AttemptsStream, err)
			}
			md, err := m.Metadata()
			if err != nil {
				return nil, fmt.Errorf("replay: message without metadata: %w", err)
			}
			if !p.At.IsZero() && md.Timestamp.After(p.At) {
				break
			}
			upTo = md.Sequence.Stream
			apply(reqs, m.Subject(), m.Data())
		}
	}
	l := &report.Ledger{Applied: upTo, StreamLast: upTo}
	sessions := map[string]*projection.SessionView{}
	for _, r := range reqs {
		s := sessions[r.SessionID]
		if s == nil {
			s = &projection.SessionView{SessionID: r.SessionID}
			sessions[r.SessionID] = s
		}
		s.Totals = s.Totals.Add(r.Contribution())
	}
	for _, s := range sessions {
		l.Sessions = append(l.Sessions, *s)
		l.Total = l.Total.Add(s.Totals)
	}
	sort.Slice(l.Sessions, func(i, j int) bool { return l.Sessions[i].SessionID < l.Sessions[j].SessionID })
	return l, nil
}

// apply folds one stored message into the requests by the aggregator's
// rules; an event the aggregator would reject is skipped.
func apply(reqs map[string]*projection.Request, subject string, data []byte) {
	ev, err := projection.Accept(subject, data)
	if err != nil {
		return
	}
	r := reqs[ev.RequestID]
	if r == nil {
		r = projection.NewRequest(ev.RequestID, ev.SessionID)
		reqs[ev.RequestID] = r
	}
	if r.Conflicts(ev) {
		return
	}
	r.Apply(ev)
}
