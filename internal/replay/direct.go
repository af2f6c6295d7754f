package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Batched direct gets ($JS.API.DIRECT.GET.<stream>): verify asks the server
// for stored messages by subject instead of holding what it read. The
// server answers a multi_last request with at most 1024 messages, in
// stream order, then an end-of-batch status (204) whose Nats-Num-Pending
// says how many it left out (a reply is cut short past the server's
// MaxPending bytes); a request is repeated from the last sequence it
// returned until nothing is pending.

// numPendingHeader, on a batch answer's end, counts what it left out.
const numPendingHeader = "Nats-Num-Pending"

// maxSubjects is the most subjects the server answers in one multi_last
// request.
const maxSubjects = 1024

// directTimeout bounds the wait for any one answer, so a lost server
// never hangs verify.
const directTimeout = time.Minute

// rawMsg is a stored message as a direct get returns it.
type rawMsg struct {
	subject string
	seq     uint64
	data    []byte
	// deleted marks a KV delete or purge marker (data is then nil).
	deleted bool
	header  nats.Header
}

type directReq struct {
	MultiLast []string `json:"multi_last,omitempty"`
	NextFor   string   `json:"next_by_subj,omitempty"`
	Seq       uint64   `json:"seq,omitempty"`
	Batch     int      `json:"batch,omitempty"`
	UpToSeq   uint64   `json:"up_to_seq,omitempty"`
}

// multiLast returns the last message of each subject (literal subjects)
// with a sequence from from to upTo (0: no bound), keyed by subject.
// Subjects without one are missing from the result. Every request is sent
// before any answer is awaited: one round trip however many subjects.
func multiLast(ctx context.Context, nc *nats.Conn, stream string, subjects []string, from, upTo uint64) (map[string]rawMsg, error) {
	out := make(map[string]rawMsg, len(subjects))
	if len(subjects) == 0 {
		return out, nil
	}
	inbox := nc.NewRespInbox()
	chunks := (len(subjects) + maxSubjects - 1) / maxSubjects
	ch, err := subscribeDirect(nc, inbox+".*")
	if err != nil {
		return nil, fmt.Errorf("replay: reading %s: %w", stream, err)
	}
	defer func() { _ = ch.Unsubscribe() }()
	api := "$JS.API.DIRECT.GET." + stream
	send := func(c int, from uint64) error {
		part := subjects[c*maxSubjects : min(len(subjects), (c+1)*maxSubjects)]
		req, _ := json.Marshal(directReq{MultiLast: part, Seq: from, UpToSeq: upTo})
		if err := nc.PublishRequest(api, inbox+"."+strconv.Itoa(c), req); err != nil {
			return fmt.Errorf("replay: reading %s: %w", stream, err)
		}
		return nil
	}
	for c := 0; c < chunks; c++ {
		if err := send(c, from); err != nil {
			return nil, err
		}
	}
	for done := 0; done < chunks; {
		m, err := receive(ctx, ch, stream)
		if err != nil {
			return nil, err
		}
		if st := m.Header.Get("Status"); len(m.Data) == 0 && st != "" {
			switch st {
			case "404": // none of the subjects has a message in range
				done++
			case "204": // end of batch
				if np, _ := strconv.ParseUint(m.Header.Get(numPendingHeader), 10, 64); np > 0 {
					last, _ := strconv.ParseUint(m.Header.Get(jetstream.LastSequenceHeader), 10, 64)
					c, _ := strconv.Atoi(m.Subject[len(inbox)+1:])
					if err := send(c, last+1); err != nil {
						return nil, err
					}
					continue
				}
				done++
			default:
				return nil, fmt.Errorf("replay: batched read of %s failed: %s %s", stream, st, m.Header.Get("Description"))
			}
			continue
		}
		r, err := parseRaw(m, stream)
		if err != nil {
			return nil, err
		}
		out[r.subject] = r
	}
	return out, nil
}

// nextBySubject calls fn with the messages on subject (wildcards allowed)
// from sequence from through upTo, in stream order, until fn returns
// false.
func nextBySubject(ctx context.Context, nc *nats.Conn, stream, subject string, from, upTo uint64, fn func(rawMsg) bool) error {
	const batch = 64
	inbox := nc.NewRespInbox()
	ch, err := subscribeDirect(nc, inbox)
	if err != nil {
		return fmt.Errorf("replay: reading %s: %w", stream, err)
	}
	defer func() { _ = ch.Unsubscribe() }()
	api := "$JS.API.DIRECT.GET." + stream
	for from <= upTo {
		req, _ := json.Marshal(directReq{NextFor: subject, Seq: from, Batch: batch})
		if err := nc.PublishRequest(api, inbox, req); err != nil {
			return fmt.Errorf("replay: reading %s: %w", stream, err)
		}
		next, more, err := nextBatch(ctx, ch, stream, subject, upTo, fn)
		if err != nil || !more {
			return err
		}
		from = next
	}
	return nil
}

// nextBatch reads one batch answer of nextBySubject and returns where the
// next batch starts and whether one is needed.
func nextBatch(ctx context.Context, ch *nats.Subscription, stream, subject string, upTo uint64, fn func(rawMsg) bool) (uint64, bool, error) {
	var next uint64
	for {
		m, err := receive(ctx, ch, stream)
		if err != nil {
			return 0, false, err
		}
		if st := m.Header.Get("Status"); len(m.Data) == 0 && st != "" {
			switch st {
			case "404":
				return 0, false, nil
			case "204":
				np, _ := strconv.ParseUint(m.Header.Get(numPendingHeader), 10, 64)
				return next, next > 0 && np > 0, nil
			default:
				return 0, false, fmt.Errorf("replay: reading %s on %s failed: %s %s", stream, subject, st, m.Header.Get("Description"))
			}
		}
		r, err := parseRaw(m, stream)
		if err != nil {
			return 0, false, err
		}
		if r.seq > upTo || !fn(r) {
			return 0, false, drain(ctx, ch, stream)
		}
		next = r.seq + 1
	}
}

// drain waits for the end of a batch answer that is no longer needed, so
// that its messages are not left to a later request on the same inbox.
func drain(ctx context.Context, ch *nats.Subscription, stream string) error {
	for {
		m, err := receive(ctx, ch, stream)
		if err != nil {
			return err
		}
		if len(m.Data) == 0 && m.Header.Get("Status") != "" {
			return nil
		}
	}
}

// subscribeDirect subscribes to the answers of direct gets. The answers
// queue in the subscription without a limit: what is asked bounds them
// (a multi_last request is answered with at most one message per subject
// asked, a next_by_subj one with its batch), so none is ever dropped for
// want of room, as a full channel or a pending limit would. It is a
// variable for the tests that force a slow consumer.
var subscribeDirect = func(nc *nats.Conn, subject string) (*nats.Subscription, error) {
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		return nil, err
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		_ = sub.Unsubscribe()
		return nil, err
	}
	return sub, nil
}

// receive returns the next answer on sub. A subscription that dropped an
// answer (a slow consumer) is an error: the answer is never asked again.
func receive(ctx context.Context, sub *nats.Subscription, stream string) (*nats.Msg, error) {
	rctx, cancel := context.WithTimeout(ctx, directTimeout)
	defer cancel()
	m, err := sub.NextMsgWithContext(rctx)
	switch {
	case err == nil:
		return m, nil
	case errors.Is(err, nats.ErrSlowConsumer):
		return nil, fmt.Errorf("%w: reading %s", ErrSlowConsumer, stream)
	case ctx.Err() != nil:
		return nil, fmt.Errorf("replay: reading %s: %w", stream, ctx.Err())
	case rctx.Err() != nil:
		return nil, fmt.Errorf("replay: reading %s: no answer from the server in %s", stream, directTimeout)
	}
	return nil, fmt.Errorf("replay: reading %s: %w", stream, err)
}

func parseRaw(m *nats.Msg, stream string) (rawMsg, error) {
	seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil {
		return rawMsg{}, fmt.Errorf("replay: batched read of %s: bad sequence header %q", stream, m.Header.Get(jetstream.SequenceHeader))
	}
	r := rawMsg{subject: m.Header.Get(jetstream.SubjectHeader), seq: seq, data: m.Data, header: m.Header}
	if op := m.Header.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
		r.data, r.deleted = nil, true
	}
	return r, nil
}
