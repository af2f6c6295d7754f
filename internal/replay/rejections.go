package replay

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/names"
)

// rejection is one event the projection refuses: what LEDGER_REJECTED
// records for it, keyed by its sequence in LEDGER_ATTEMPTS.
type rejection struct {
	seq     uint64
	reason  events.Reason
	subject string // the original subject
	body    []byte // at most events.MaxEventBytes of it (projection.RejectionBody)
	size    int    // the original body's size when body is cut, else 0
	// unreadable, on a live record, says why its subject names no reason
	// and sequence.
	unreadable string
}

// rejections compares LEDGER_REJECTED with the rejections the replay
// produces, merging both by original stream sequence as the replay goes:
// LEDGER_REJECTED holds them in that order (the single writer records
// them one at a time, in stream order), so neither side is held.
type rejections struct {
	c       *diffs
	upTo    uint64 // the point compared: the live checkpoint
	live    <-chan rejection
	errc    <-chan error
	head    *rejection // the next live record, once read
	lastSeq uint64     // of the last live record taken
	done    bool
}

// readRejections reads LEDGER_REJECTED in order, up to the records of
// original sequence upTo, on its own goroutine; stop cancels it and waits.
func readRejections(ctx context.Context, js jetstream.JetStream, c *diffs, upTo uint64) (*rejections, func(), error) {
	r := &rejections{c: c, upTo: upTo}
	stream, err := js.Stream(ctx, names.RejectedStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		r.done = true
		return r, func() {}, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("replay: opening %s: %w", names.RejectedStream, err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("replay: reading %s: %w", names.RejectedStream, err)
	}
	if info.State.Msgs == 0 || upTo == 0 {
		r.done = true
		return r, func() {}, nil
	}
	live, errc := make(chan rejection, 64), make(chan error, 1)
	r.live, r.errc = live, errc
	rctx, cancel := context.WithCancel(ctx)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		defer close(live)
		errc <- readRejected(rctx, stream, js.Conn().MaxPayload(), upTo, live)
	}()
	return r, func() { cancel(); <-finished }, nil
}

// readRejected sends the records of stream in order until none follows,
// stopping after the first beyond original sequence upTo.
func readRejected(ctx context.Context, stream jetstream.Stream, maxPayload int64, upTo uint64, out chan<- rejection) error {
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return fmt.Errorf("replay: reading %s: %w", names.RejectedStream, err)
	}
	it, err := readPull(cons, maxPayload, 256)
	if err != nil {
		return fmt.Errorf("replay: reading %s: %w", names.RejectedStream, err)
	}
	defer it.stop()
	for {
		m, err := it.next(ctx)
		if err != nil {
			return fmt.Errorf("replay: reading %s: %w", names.RejectedStream, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("replay: a message without metadata: %w", err)
		}
		r := liveRejection(m.Subject(), m.Headers(), m.Data())
		select {
		case out <- r:
		case <-ctx.Done():
			return ctx.Err()
		}
		if r.seq > upTo {
			return nil
		}
		if md.NumPending == 0 {
			more, err := anyAfter(ctx, stream, names.RejectedSubjects, md.Sequence.Stream)
			if err != nil || !more {
				return err
			}
		}
	}
}

func liveRejection(subject string, h nats.Header, body []byte) rejection {
	rest, ok := strings.CutPrefix(subject, strings.TrimSuffix(names.RejectedSubjects, ">"))
	reason, seqText, ok2 := strings.Cut(rest, ".")
	seq, err := strconv.ParseUint(seqText, 10, 64)
	if !ok || !ok2 || err != nil || seq == 0 {
		return rejection{unreadable: subject, body: body}
	}
	size, _ := strconv.Atoi(h.Get(events.HeaderOriginalSize)) // absent: 0, the body is whole
	return rejection{seq: seq, reason: events.Reason(reason), subject: h.Get(events.HeaderOriginalSubject), body: body, size: size}
}

// peek returns the next live record, if any.
func (r *rejections) peek() (*rejection, error) {
	if r.head != nil || r.done {
		return r.head, nil
	}
	rec, ok := <-r.live
	if !ok {
		r.done = true
		if err := <-r.errc; err != nil {
			return nil, err
		}
		return nil, nil
	}
	r.head = &rec
	return r.head, nil
}

// at merges the replay's outcome for the message at seq (re nil: the
// event was accepted) with the live records up to seq. Messages must come
// in stream order; those past upTo are not compared.
func (r *rejections) at(seq uint64, re *rejection) error {
	if seq > r.upTo {
		return nil
	}
	for {
		head, err := r.peek()
		if err != nil {
			return err
		}
		if head == nil || (head.unreadable == "" && head.seq > seq) {
			break
		}
		r.head = nil
		if !r.take(head) {
			continue
		}
		if head.seq < seq {
			r.liveOnly(head, "present")
			continue
		}
		r.compare(head, re)
		return nil
	}
	if re != nil {
		r.compare(nil, re)
	}
	return nil
}

// finish reports the live records past the last message the replay
// merged, up to upTo.
func (r *rejections) finish() error {
	for {
		head, err := r.peek()
		if err != nil || head == nil {
			return err
		}
		r.head = nil
		if head.unreadable == "" && head.seq > r.upTo {
			continue
		}
		if r.take(head) {
			r.liveOnly(head, "present")
		}
	}
}

// take accepts the next live record in order, or reports it when it
// cannot be in order (an unreadable subject, a sequence recorded again)
// and returns false. A record accepted before its message comes is one
// the replay has nothing for.
func (r *rejections) take(l *rejection) bool {
	switch {
	case l.unreadable != "":
		r.liveOnly(l, "unreadable subject")
		return false
	case l.seq <= r.lastSeq:
		r.liveOnly(l, "recorded again, out of order")
		return false
	}
	r.lastSeq = l.seq
	return true
}

// liveOnly reports a live record the replay has no rejection for.
func (r *rejections) liveOnly(l *rejection, live string) {
	r.c.d.RejectionsChecked++
	r.c.d.RejectionsDiffer++
	rec := &record{c: r.c, kind: KindRejection, id: strconv.FormatUint(l.seq, 10), seq: r.upTo}
	if l.unreadable != "" {
		rec.id = l.unreadable
	}
	rec.add(FieldRecord, live, "absent", nil)
}

// compare reports how a live record (nil: none) differs from the replay's.
func (r *rejections) compare(l, re *rejection) {
	r.c.d.RejectionsChecked++
	rec := &record{c: r.c, kind: KindRejection, seq: r.upTo}
	switch {
	case l == nil:
		rec.id = strconv.FormatUint(re.seq, 10)
		rec.add(FieldRecord, "absent", "present", nil)
	case re == nil:
		rec.id = strconv.FormatUint(l.seq, 10)
		rec.add(FieldRecord, "present", "absent", nil)
	default:
		rec.id = strconv.FormatUint(l.seq, 10)
		rec.str("reason", string(l.reason), string(re.reason))
		rec.str("subject", l.subject, re.subject)
		if !bytes.Equal(l.body, re.body) {
			rec.add("body", describeBody(l.body), describeBody(re.body), nil)
		}
		rec.num("original_size", int64(l.size), int64(re.size))
	}
	if rec.differ {
		r.c.d.RejectionsDiffer++
	}
}

// describeBody names a body in a difference: its length and digest.
func describeBody(b []byte) string {
	sum := sha256.Sum256(b)
	return fmt.Sprintf("%d bytes, sha256 %x", len(b), sum[:6])
}
