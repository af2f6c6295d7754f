package projection

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrConflict means a compare-and-set write found another revision than the
// one this aggregator last read or wrote: another writer touched the key.
var ErrConflict = errors.New("projection: write conflict")

// put is one compare-and-set write: key must be at revision rev (0: absent).
type put struct {
	key   string
	value []byte
	rev   uint64 // expected revision; replaced by the new one once acked
	del   bool   // a delete marker instead of a value
}

// bucket reads and writes one KV bucket. Reads are batched direct gets; writes are
// pipelined compare-and-set publishes to the bucket's subjects, so a batch
// costs one round trip per bucket, not one per key.
type bucket struct {
	js     jetstream.JetStream
	kv     jetstream.KeyValue
	stream jetstream.Stream // the bucket's stream, KV_<bucket>
	prefix string           // "$KV.<bucket>."
	// wait is how long a read or a write waits for the server's next
	// answer before it gives up (a leader change, a dead server).
	wait time.Duration
}

// DefaultAckWait is how long the aggregator waits for the server's next
// answer to a batch's reads or writes (Config.AckWait).
const DefaultAckWait = 5 * time.Second

func newBucket(ctx context.Context, js jetstream.JetStream, kv jetstream.KeyValue) (*bucket, error) {
	s, err := js.Stream(ctx, "KV_"+kv.Bucket())
	if err != nil {
		return nil, fmt.Errorf("projection: opening the stream of bucket %s: %w", kv.Bucket(), err)
	}
	return &bucket{js: js, kv: kv, stream: s, prefix: "$KV." + kv.Bucket() + ".", wait: DefaultAckWait}, nil
}

// errNoAnswer means the server stopped answering a batch's reads or
// writes for longer than the bucket's wait.
var errNoAnswer = errors.New("no answer from the server")

// answers waits for the answers to a round of requests, each within the
// bucket's wait of the previous one: the round fails soon after the
// server stops answering, however long the round is.
type answers struct {
	ch    chan *nats.Msg
	timer *time.Timer
	wait  time.Duration
}

func (b *bucket) answers(ch chan *nats.Msg) *answers {
	return &answers{ch: ch, timer: time.NewTimer(b.wait), wait: b.wait}
}

// next returns the next answer.
func (a *answers) next(ctx context.Context) (*nats.Msg, error) {
	select {
	case m := <-a.ch:
		a.timer.Reset(a.wait)
		return m, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-a.timer.C:
		return nil, fmt.Errorf("%w for %s (a leader change or a lost server?)", errNoAnswer, a.wait)
	}
}

func (a *answers) stop() { a.timer.Stop() }

// putAll writes every put with compare-and-set, pipelined, and waits for
// every acknowledgement. On success each put's rev is its new revision. On
// failure some puts may have landed and others not; the caller treats the
// batch as failed and starts again from its checkpoint.
//
// When last is not nil, every put also expects the bucket's stream to end
// at *last plus the puts before it (a term's fence, see term.go): a write
// by anyone else since makes this put and every later one fail. On
// success *last is the new last sequence.
//
// It publishes on the core connection with its own reply subscription
// rather than through the JetStream client's asynchronous publisher: one
// reused message, no future per write, and acknowledgements read without
// encoding/json (which was a tenth of the aggregator's CPU).
func (b *bucket) putAll(ctx context.Context, puts []put, last *uint64) error {
	if len(puts) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("projection: writing %s: %w", b.kv.Bucket(), err)
	}
	nc := b.js.Conn()
	inbox := nc.NewRespInbox() + "."
	ch := make(chan *nats.Msg, len(puts)) // room for every answer: a full channel would drop one
	sub, err := nc.ChanSubscribe(inbox+"*", ch)
	if err != nil {
		return fmt.Errorf("projection: writing %s: %w", b.kv.Bucket(), err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	m := &nats.Msg{Header: nats.Header{jetstream.ExpectedLastSubjSeqHeader: []string{""}}}
	if last != nil {
		m.Header[jetstream.ExpectedLastSeqHeader] = []string{""}
	}
	reply := make([]byte, 0, len(inbox)+8)
	subj := make([]byte, 0, len(b.prefix)+64)
	for i := range puts {
		subj = append(append(subj[:0], b.prefix...), puts[i].key...)
		reply = strconv.AppendInt(append(reply[:0], inbox...), int64(i), 36)
		m.Subject, m.Reply, m.Data = string(subj), string(reply), puts[i].value
		m.Header[jetstream.ExpectedLastSubjSeqHeader][0] = strconv.FormatUint(puts[i].rev, 10)
		if last != nil {
			m.Header[jetstream.ExpectedLastSeqHeader][0] = strconv.FormatUint(*last+uint64(i), 10)
		}
		if puts[i].del {
			m.Header[kvOperationHeader] = []string{"DEL"}
		} else {
			delete(m.Header, kvOperationHeader)
		}
		if err := nc.PublishMsg(m); err != nil {
			return fmt.Errorf("projection: writing %s/%s: %w", b.kv.Bucket(), puts[i].key, err)
		}
	}
	var first error
	acks := b.answers(ch)
	defer acks.stop()
	for range puts {
		a, err := acks.next(ctx)
		if err != nil {
			return fmt.Errorf("projection: waiting for writes to %s: %w", b.kv.Bucket(), err)
		}
		i, err := strconv.ParseInt(a.Subject[min(len(inbox), len(a.Subject)):], 36, 0)
		if err != nil || i < 0 || int(i) >= len(puts) {
			return fmt.Errorf("projection: writing %s: acknowledgement on unexpected subject %q", b.kv.Bucket(), a.Subject)
		}
		seq, err := parseAck(a)
		if err != nil {
			if first == nil {
				first = b.writeErr(puts[i].key, err)
			}
			continue
		}
		puts[i].rev = seq
	}
	if first == nil && last != nil {
		*last += uint64(len(puts))
		if got := puts[len(puts)-1].rev; got != *last {
			return fmt.Errorf("%w: %s ends at %d after this term's writes, want %d", ErrInvariant, b.kv.Bucket(), got, *last)
		}
	}
	return first
}

// putOne writes one key with compare-and-set on rev (0: absent) and
// returns its new revision.
func (b *bucket) putOne(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	p := []put{{key: key, value: value, rev: rev}}
	if err := b.putAll(ctx, p, nil); err != nil {
		return 0, err
	}
	return p[0].rev, nil
}

// parseAck returns the stream sequence of a JetStream publish
// acknowledgement ({"stream":"KV_x","seq":42}), or its error.
func parseAck(m *nats.Msg) (uint64, error) {
	if len(m.Data) == 0 {
		if st := m.Header.Get("Status"); st == "503" {
			return 0, nats.ErrNoResponders
		} else if st != "" {
			return 0, fmt.Errorf("status %s %s", st, m.Header.Get("Description"))
		}
		return 0, errors.New("empty acknowledgement")
	}
	if !bytes.Contains(m.Data, []byte(`"error"`)) {
		if i := bytes.Index(m.Data, []byte(`"seq":`)); i >= 0 {
			d := m.Data[i+len(`"seq":`):]
			n := 0
			for n < len(d) && d[n] >= '0' && d[n] <= '9' {
				n++
			}
			if seq, err := strconv.ParseUint(string(d[:n]), 10, 64); err == nil && seq > 0 {
				return seq, nil
			}
		}
	}
	var ack struct {
		Error *jetstream.APIError `json:"error"`
		Seq   uint64              `json:"seq"`
	}
	if err := json.Unmarshal(m.Data, &ack); err != nil {
		return 0, fmt.Errorf("unreadable acknowledgement %q: %w", m.Data, err)
	}
	if ack.Error != nil {
		return 0, ack.Error
	}
	if ack.Seq == 0 {
		return 0, fmt.Errorf("acknowledgement without a sequence: %q", m.Data)
	}
	return ack.Seq, nil
}

func (b *bucket) writeErr(key string, err error) error {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
		return fmt.Errorf("%w on %s/%s: %v", ErrConflict, b.kv.Bucket(), key, err)
	}
	return fmt.Errorf("projection: writing %s/%s: %w", b.kv.Bucket(), key, err)
}

// Batched reads ask for the last message of many subjects at once
// ("multi_last" direct gets). The server answers at most maxMultiGet
// subjects per request and stops once it has sent max_bytes (after the
// message that reaches it); its end of batch then says how many it left
// out. Each request asks for at most multiGetMaxBytes, and at most
// multiGetWindow requests are in flight, so a read holds a bounded number
// of bytes in transit however large the records are.
const (
	maxMultiGet    = 1024
	multiGetWindow = 8
)

// multiGetMaxBytes is each request's max_bytes: 4 MiB, a few records of
// the largest kind or thousands of ordinary ones. A variable so that tests
// can cut every reply short.
var multiGetMaxBytes = 4 << 20

// stored is a value read back with its revision.
type stored struct {
	value []byte
	rev   uint64
}

// getMany reads the last value of every key with batched direct gets,
// maxMultiGet keys per request, multiGetWindow requests in flight: one
// round trip for up to 8,192 keys of ordinary size. A reply the server
// cuts short is continued: the keys it left out are asked for again at the
// same stream sequence (up_to_seq), and the continuation must return as
// many as the server said it left out, so a key is never taken for absent
// because a reply was cut or the bucket changed meanwhile. Absent keys are
// missing from the result; a deleted key is present with a nil value and
// the revision of its delete marker (the revision a compare-and-set must
// name).
func (b *bucket) getMany(ctx context.Context, keys []string) (map[string]stored, error) {
	out := make(map[string]stored, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	nc := b.js.Conn()
	r := &multiReader{b: b, nc: nc, inbox: nc.NewRespInbox() + ".", out: out, inFlight: map[string]*multiGet{}}
	// Room for every answer in flight (a full channel would drop one):
	// each request is answered by at most its keys and an end of batch.
	ch := make(chan *nats.Msg, min(len(keys), multiGetWindow*maxMultiGet)+multiGetWindow)
	sub, err := nc.ChanSubscribe(r.inbox+"*", ch)
	if err != nil {
		return nil, fmt.Errorf("projection: reading %s: %w", b.kv.Bucket(), err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	for i := 0; i < len(keys); i += maxMultiGet {
		r.queue = append(r.queue, &multiGet{keys: keys[i:min(len(keys), i+maxMultiGet)], leftOut: -1})
	}
	replies := b.answers(ch)
	defer replies.stop()
	for len(r.queue) > 0 || len(r.inFlight) > 0 {
		if err := r.send(); err != nil {
			return nil, err
		}
		m, err := replies.next(ctx)
		if err != nil {
			return nil, fmt.Errorf("projection: reading %s: %w", b.kv.Bucket(), err)
		}
		if err := r.receive(m); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// multiGet is one batched direct get: the keys it asks for and, for a
// continuation, the stream sequence it is pinned to and how many of its
// keys the server said exist.
type multiGet struct {
	keys    []string
	upTo    uint64 // 0: the stream's last sequence when the server reads it
	leftOut int    // keys of these the server said it left out; -1 on a first ask
	got     int    // keys answered so far
}

// multiReader runs the requests of one getMany.
type multiReader struct {
	b        *bucket
	nc       *nats.Conn
	inbox    string // ends in "."; each request's reply subject adds its number
	out      map[string]stored
	queue    []*multiGet
	inFlight map[string]*multiGet // by reply subject
	sent     int
}

// send sends queued requests while fewer than multiGetWindow are in flight.
func (r *multiReader) send() error {
	for len(r.queue) > 0 && len(r.inFlight) < multiGetWindow {
		g := r.queue[0]
		r.queue = r.queue[1:]
		subjects := make([]string, len(g.keys))
		for i, k := range g.keys {
			subjects[i] = r.b.prefix + k
		}
		req, err := json.Marshal(struct {
			MultiLast []string `json:"multi_last"`
			UpToSeq   uint64   `json:"up_to_seq,omitempty"`
			MaxBytes  int      `json:"max_bytes"`
		}{subjects, g.upTo, multiGetMaxBytes})
		if err != nil {
			return err
		}
		reply := r.inbox + strconv.Itoa(r.sent)
		r.sent++
		if err := r.nc.PublishRequest("$JS.API.DIRECT.GET.KV_"+r.b.kv.Bucket(), reply, req); err != nil {
			return fmt.Errorf("projection: reading %s: %w", r.b.kv.Bucket(), err)
		}
		r.inFlight[reply] = g
	}
	return nil
}

// receive takes one message of a reply: a value, or the status that ends
// the reply.
func (r *multiReader) receive(m *nats.Msg) error {
	g := r.inFlight[m.Subject]
	if g == nil {
		return fmt.Errorf("projection: batched read of %s: answer on unexpected subject %q", r.b.kv.Bucket(), m.Subject)
	}
	if st := m.Header.Get("Status"); len(m.Data) == 0 && st != "" {
		delete(r.inFlight, m.Subject)
		return r.end(g, m)
	}
	subj := m.Header.Get(jetstream.SubjectHeader)
	key, ok := strings.CutPrefix(subj, r.b.prefix)
	if !ok {
		return fmt.Errorf("projection: batched read of %s returned subject %q", r.b.kv.Bucket(), subj)
	}
	rev, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil {
		return fmt.Errorf("projection: batched read of %s: bad sequence header %q", r.b.kv.Bucket(), m.Header.Get(jetstream.SequenceHeader))
	}
	value := m.Data
	if op := m.Header.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
		value = nil
	}
	r.out[key] = stored{value: value, rev: rev}
	g.got++
	return nil
}

// end handles the status that ends a reply: 204 (end of batch, saying how
// many existing keys it left out and the sequence it read at) or 404 No
// Results (none of the keys exists). Keys left out are queued again.
func (r *multiReader) end(g *multiGet, m *nats.Msg) error {
	var leftOut int
	var upTo uint64
	switch st, desc := m.Header.Get("Status"), m.Header.Get("Description"); {
	case st == "204":
		n, err1 := strconv.Atoi(m.Header.Get(headerNumPending))
		u, err2 := strconv.ParseUint(m.Header.Get(headerUpToSeq), 10, 64)
		if err1 != nil || err2 != nil || n < 0 {
			return fmt.Errorf("projection: batched read of %s: unreadable end of batch %q %q", r.b.kv.Bucket(), m.Header.Get(headerNumPending), m.Header.Get(headerUpToSeq))
		}
		leftOut, upTo = n, u
	case st == "404" && desc == "No Results":
	default:
		return fmt.Errorf("projection: batched read of %s failed: %s %s", r.b.kv.Bucket(), st, desc)
	}
	if g.leftOut >= 0 && g.got+leftOut != g.leftOut {
		return fmt.Errorf("projection: batched read of %s: %d keys were left out of a reply but %d were found when asked again; the bucket changed while being read",
			r.b.kv.Bucket(), g.leftOut, g.got+leftOut)
	}
	if leftOut == 0 {
		return nil
	}
	next := &multiGet{upTo: upTo, leftOut: leftOut}
	for _, k := range g.keys {
		if _, ok := r.out[k]; !ok {
			next.keys = append(next.keys, k)
		}
	}
	if len(next.keys) == 0 {
		return fmt.Errorf("projection: batched read of %s: the server left out %d keys, but every key was answered", r.b.kv.Bucket(), leftOut)
	}
	r.queue = append(r.queue, next)
	return nil
}

// Headers of a batched direct get's end of batch.
const (
	headerNumPending = "Nats-Num-Pending"
	headerUpToSeq    = "Nats-UpTo-Sequence"
)
