package projection

import (
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/events"
)

// What the aggregator holds of its input is bounded in bytes as well as in
// messages, whatever the stream holds (a stream created before
// LEDGER_ATTEMPTS had a MaxMsgSize may hold messages up to the server's
// max_payload):
//
//   - the consumer asks the server for at most PullBytes per pull request
//     (more only when one message could be larger);
//   - a rejected message keeps at most events.MaxEventBytes of its body
//     (fetch), and the read-ahead between the consumer and the batches
//     holds at most readAheadBytes of decoded events and rejected bodies;
//   - a batch takes at most batchBytes of them.
//
// So the input costs at most about two pull requests, the read-ahead, the
// batch being prepared and the one committing: under 64 MiB, against a
// 1 GiB peak before the bounds with 700 KiB bodies.
const (
	// PullBytes is the most bytes one pull request of a reader of
	// LEDGER_ATTEMPTS asks for (PullLimits).
	PullBytes = 8 << 20
	// pullSlack is what a delivered message has beyond the payload it was
	// published with: its subject (at most the server's max_control_line,
	// 4 KiB by default) and the acknowledgement subject.
	pullSlack = 8 << 10
	// readAheadBytes bounds what waits in the read-ahead; batchBytes what
	// one batch takes (see fetched.cost).
	readAheadBytes = 16 << 20
	batchBytes     = 16 << 20
	// fetchedOverhead is what a fetched message costs beyond its strings:
	// the decoded event's structs, or a rejection's error.
	fetchedOverhead = 256
)

// PullOpt bounds a pull consumer's reads; it serves Consume and Messages
// alike.
type PullOpt interface {
	jetstream.PullConsumeOpt
	jetstream.PullMessagesOpt
}

// PullLimits bounds a reader of LEDGER_ATTEMPTS to messages per pull
// request and PullBytes, or maxPayload and some slack when larger: a pull
// request must have room for the largest message the stream may hold, the
// server's max_payload (nats.Conn.MaxPayload) for a stream created without
// MaxMsgSize, or the consumer would stall on it.
func PullLimits(maxPayload int64, messages int) PullOpt {
	return jetstream.PullMaxMessagesWithBytesLimit(messages, int(max(PullBytes, maxPayload+pullSlack)))
}

// cost is what a fetched message holds in memory until its batch is
// written: a rejected one its subject and (clipped) body, an accepted one
// its decoded strings.
func (f *fetched) cost() int {
	n := fetchedOverhead + len(f.subject) + len(f.data)
	if ev := f.ev; ev != nil {
		n += len(ev.EventID) + len(ev.RequestID) + len(ev.SessionID) + len(ev.Provider) + len(ev.Model) + len(ev.ProviderRequestID)
		if ev.Error != nil {
			n += len(ev.Error.Message)
		}
	}
	return n
}

// intake hands fetched messages from the consumer's goroutine to the
// batch loop: at most n of them (the channel), and at most limit bytes of
// them (their cost).
type intake struct {
	ch    chan fetched
	limit int

	mu      sync.Mutex
	used    int
	freed   chan struct{} // closed when bytes are released while a put waits
	waiting bool
}

func newIntake(n, limit int) *intake {
	return &intake{ch: make(chan fetched, n), limit: limit, freed: make(chan struct{})}
}

// put waits for room for f and queues it; it gives up when stop is closed.
// A message is always let in when the read-ahead is empty, so even one
// larger than the limit passes.
func (r *intake) put(f fetched, stop <-chan struct{}) {
	c := f.cost()
	for {
		r.mu.Lock()
		if r.used == 0 || r.used+c <= r.limit {
			r.used += c
			r.mu.Unlock()
			break
		}
		r.waiting = true
		freed := r.freed
		r.mu.Unlock()
		select {
		case <-freed:
		case <-stop:
			return
		}
	}
	select {
	case r.ch <- f:
	case <-stop:
	}
}

// took releases the bytes of f, which the batch loop has taken out of ch,
// and returns its cost.
func (r *intake) took(f *fetched) int {
	c := f.cost()
	r.mu.Lock()
	r.used -= c
	if r.waiting {
		close(r.freed)
		r.freed, r.waiting = make(chan struct{}), false
	}
	r.mu.Unlock()
	return c
}

// fill releases the bytes of the messages in batch, which the batch loop
// has taken out of ch, then appends whatever is queued until the batch
// holds n messages or batchBytes of them.
func (r *intake) fill(batch []fetched, n int) []fetched {
	size := 0
	for i := range batch {
		size += r.took(&batch[i])
	}
	for len(batch) < n && size < batchBytes {
		select {
		case f := <-r.ch:
			size += r.took(&f)
			batch = append(batch, f)
		default:
			return batch
		}
	}
	return batch
}

// RejectionBody returns what a LEDGER_REJECTED record keeps of a rejected
// body: all of it up to events.MaxEventBytes (every body the contract
// allows), else a copy of its first events.MaxEventBytes (so that the rest
// can be freed) and the size it had, which the record's
// events.HeaderOriginalSize gives. A replay that compares rejections cuts
// the bodies it recomputes the same way.
func RejectionBody(data []byte) (kept []byte, size int) {
	if len(data) <= events.MaxEventBytes {
		return data, 0
	}
	return append([]byte(nil), data[:events.MaxEventBytes]...), len(data)
}

// clipText cuts s to at most n bytes at a character boundary, marking the
// cut with "…", for the headers of a rejection.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// setOriginalSize marks a rejection record whose body was cut with the
// size the body had.
func setOriginalSize(h nats.Header, r *rejection) {
	if r.size > 0 {
		h.Set(events.HeaderOriginalSize, strconv.Itoa(r.size))
	}
}
