package replay

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/projection"
)

// scanned is one stream message as the replay sees it: decoded and
// checked (projection.Accept) on the consumer's goroutine.
type scanned struct {
	seq     uint64
	subject string
	data    []byte
	ev      *events.Attempt // nil when rejected
	err     error           // why it is rejected
	metaErr error
}

// readStream delivers the messages of LEDGER_ATTEMPTS from sequence 1
// through last, decoded, on out; stop ends the consumer.
func readStream(ctx context.Context, stream jetstream.Stream, maxPayload int64, last uint64, out chan<- scanned) (stop func(), err error) {
	// No filter: the stream holds only attempt subjects, and a filter
	// makes the server match every message against it.
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, fmt.Errorf("replay: reading %s: %w", names.AttemptsStream, err)
	}
	quit := make(chan struct{})
	cc, err := cons.Consume(func(m jetstream.Msg) {
		s := scanned{subject: m.Subject(), data: m.Data()}
		md, err := m.Metadata()
		if err != nil {
			s.metaErr = err
		} else {
			s.seq = md.Sequence.Stream
			if s.seq > last {
				return
			}
			s.ev, s.err = projection.Accept(s.subject, s.data)
		}
		select {
		case out <- s:
		case <-quit:
		}
	}, projection.PullLimits(maxPayload, 10_000))
	if err != nil {
		return nil, fmt.Errorf("replay: reading %s: %w", names.AttemptsStream, err)
	}
	return func() { close(quit); cc.Stop() }, nil
}

// batch is a run of consecutive stream messages replayed together.
type batch struct {
	msgs []scanned
	end  uint64 // the last sequence
	// firsts are the requests met in the batch that were not in memory
	// when it was read, and look their lookup, under way meanwhile.
	firsts []first
	look   <-chan lookupResult
}

// nextBatch waits for the next message, then takes those already read,
// up to the batch size or the target.
func (v *verifier) nextBatch(ctx context.Context, in <-chan scanned, pos uint64) (*batch, error) {
	b := &batch{msgs: make([]scanned, 0, v.lim.batch)}
	for len(b.msgs) < v.lim.batch && pos < v.target {
		var m scanned
		if len(b.msgs) == 0 {
			select {
			case m = <-in:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		} else {
			select {
			case m = <-in:
			default:
				return b, nil
			}
		}
		if m.metaErr != nil {
			return nil, fmt.Errorf("replay: a message without metadata: %w", m.metaErr)
		}
		if m.seq <= pos {
			continue // delivered again after the consumer reset
		}
		if m.seq > pos+1 {
			// The stream's sequences are consecutive: events were removed
			// (retention) while verify read, or a reply was lost.
			return nil, fmt.Errorf("%w: events %d to %d of %s were not delivered to verify (removed while it read them?); could not compare",
				ErrIncomplete, pos+1, m.seq-1, names.AttemptsStream)
		}
		b.msgs = append(b.msgs, m)
		b.end, pos = m.seq, m.seq
	}
	return b, nil
}

// replay replays the stream through the target in batches. While one
// batch is applied, the next is read and the lookups of its new requests
// are under way.
func (v *verifier) replay(ctx context.Context, stream jetstream.Stream) error {
	progress := v.o.Progress
	if progress == nil {
		progress = func(uint64, uint64) {}
	}
	if v.target == 0 {
		progress(0, 0)
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	in := make(chan scanned, v.lim.batch/2)
	stop, err := readStream(ctx, stream, v.nc.MaxPayload(), v.target, in)
	if err != nil {
		return err
	}
	defer stop()
	var cur, next *batch
	defer func() { // a lookup under way when the replay fails ends with ctx
		for _, b := range []*batch{cur, next} {
			if b != nil && b.look != nil {
				cancel()
				<-b.look
			}
		}
	}()
	pos := v.first - 1
	for {
		next = nil
		if pos < v.target {
			if next, err = v.nextBatch(ctx, in, pos); err != nil {
				return err
			}
			pos = next.end
			v.prepare(ctx, next, cur)
		}
		if cur != nil {
			if err := v.process(ctx, cur); err != nil {
				return err
			}
			progress(cur.end, v.target)
		}
		cur = next
		if cur == nil {
			break
		}
	}
	return v.open.checkEmpty()
}
