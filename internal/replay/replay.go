package replay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/projection"
)

// ErrInvalidPoint is returned for a point in time that names nothing.
var ErrInvalidPoint = errors.New("replay: invalid point in time")

// Point says where the replay stops: at stream sequence Seq (inclusive), or
// at the last event stored at or before At. Exactly one is set.
type Point struct {
	Seq uint64
	At  time.Time
}

// Rollup is the ledger's sessions as the stream's events up to Seq make
// them.
type Rollup struct {
	Seq      uint64                   // the last stream sequence applied
	Sessions []projection.SessionView // sorted by session ID
	Total    projection.Totals        // their sum
}

// Ledger recomputes the session rollups from the stream's events up to p.
func Ledger(ctx context.Context, js jetstream.JetStream, p Point, o Options) (*Rollup, error) {
	if (p.Seq == 0) == p.At.IsZero() {
		return nil, fmt.Errorf("%w: give exactly one of a sequence (at least 1) or a time", ErrInvalidPoint)
	}
	stream, info, err := openStream(ctx, js)
	if err != nil {
		return nil, err
	}
	last := info.State.LastSeq
	if info.State.Msgs == 0 {
		last = 0
	}
	if p.Seq > 0 && p.Seq < last {
		last = p.Seq
	}
	apply, _, err := o.pricedApply(ctx, js, true)
	if err != nil {
		return nil, err
	}
	mem := NewMemory(apply)
	err = scan(ctx, stream, js.Conn().MaxPayload(), 1, last, o.Progress, func(m stored) bool {
		if !p.At.IsZero() && m.time.After(p.At) {
			return false
		}
		mem.Apply(m.seq, m.subject, m.data)
		return true
	})
	if err != nil {
		return nil, err
	}
	l := &Rollup{Seq: mem.Seq()}
	l.Sessions, l.Total = mem.Sessions()
	return l, nil
}

func openStream(ctx context.Context, js jetstream.JetStream) (jetstream.Stream, *jetstream.StreamInfo, error) {
	stream, err := js.Stream(ctx, names.AttemptsStream)
	if err != nil {
		return nil, nil, fmt.Errorf("replay: opening %s: %w", names.AttemptsStream, err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("replay: reading %s: %w", names.AttemptsStream, err)
	}
	return stream, info, nil
}
