package projection

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/topology"
)

// newEnvOn is newEnv on a server with NATS's default max_payload stated
// (1 MiB); with old, LEDGER_ATTEMPTS is created as before it had a
// MaxMsgSize, so it stores any message the server takes.
func newEnvOn(t testing.TB, old bool) *env {
	t.Helper()
	ss, nc, js := natstest.StartJS(t, natstest.WithMaxPayload(1<<20))
	cfg, err := topology.AttemptsStreamConfig(topology.Config{})
	require.NoError(t, err)
	if old {
		cfg.MaxMsgSize = 0
	}
	_, err = js.CreateStream(context.Background(), cfg)
	require.NoError(t, err)
	return &env{t: t, nc: nc, js: js, ss: ss}
}

// escapeHeavy are bytes JSON escapes as \u00XX: six bytes each.
const escapeHeavy = "\x00\x01\x02\x03\x04\x05\x06\x07\x0b\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f<>&"

// worstName is a name of n bytes, all of them escape-heavy, distinct for
// every i below 27,000.
func worstName(i, n int) string {
	b := []byte(strings.Repeat("\x01", n))
	k := len(escapeHeavy)
	b[0], b[1], b[2] = escapeHeavy[i%k], escapeHeavy[i/k%k], escapeHeavy[i/k/k%k]
	return string(b)
}

// fatRequest is one request with every attempt the contract allows
// (0 to 1000), each with its own provider and model of the longest and most
// escaped kind and the largest token counts; the last attempt succeeds.
func fatRequest(t testing.TB, session, request string, n0 int) []wire {
	t.Helper()
	var ws []wire
	for a := 0; a <= events.MaxAttempt; a++ {
		ev := evSpec{n: n0 + a, session: session, request: request, attempt: a, success: a == events.MaxAttempt}.event()
		ev.Provider, ev.Model = worstName(a, events.MaxProviderLength), worstName(a, events.MaxModelLength)
		ev.Usage = events.Usage{InputTokens: events.MaxTokens, OutputTokens: events.MaxTokens,
			CacheReadInputTokens: events.MaxTokens / 2, CacheCreationInputTokens: events.MaxTokens / 2}
		require.NoError(t, ev.Validate())
		data, err := events.Marshal(ev)
		require.NoError(t, err)
		ws = append(ws, wire{subject: events.Subject(session, request), data: data, msgID: ev.EventID})
	}
	return ws
}

// requireStoredLog asserts that the stored record of request holds one
// entry per event of ws, with the event's own provider and model, and fits
// MaxRequestRecordBytes.
func (e *env) requireStoredLog(request string, ws []wire) {
	e.t.Helper()
	kv, err := e.js.KeyValue(context.Background(), names.RequestsBucket)
	require.NoError(e.t, err)
	entry, err := kv.Get(context.Background(), request)
	require.NoError(e.t, err)
	require.LessOrEqual(e.t, len(entry.Value()), MaxRequestRecordBytes)
	var r Request
	require.NoError(e.t, json.Unmarshal(entry.Value(), &r))
	require.Len(e.t, r.Log, len(ws))
	for i, w := range ws {
		ev, err := events.Decode(w.data)
		require.NoError(e.t, err)
		require.Equal(e.t, r.entryOf(ev, nil), normalise(&r).Log[i], "attempt %d", i)
	}
}

// One valid request with 1,001 attempts, each with its own worst-case
// model and provider, is projected exactly under a 1 MiB max_payload, and
// the events of other sessions published after it are counted.
func TestFatRequestProjectedExactly(t *testing.T) {
	e := newEnvOn(t, false)
	fat := fatRequest(t, "S-fat", "R-fat", 1)
	var after []wire
	for i := range 20 {
		after = append(after, evSpec{n: 5000 + i, session: fmt.Sprintf("S%d", i%3), request: fmt.Sprintf("R%d", i),
			attempt: 0, success: true, in: int64(10 + i), out: 5}.wire(t))
	}
	ws := append(append([]wire(nil), fat...), after...)
	e.publish(ws...)
	e.start(Config{BatchSize: 300})
	e.waitCheckpoint(e.lastSeq())
	e.requireLedger(buildModel(wireStored(ws)))
	e.requireStoredLog("R-fat", fat)
}

// An aggregator that reads its records back with every reply cut short
// (one record per reply) projects the same ledger as the model: a key left
// out of a reply is asked for again, never taken for absent.
func TestAggregatorReadsShortReplies(t *testing.T) {
	shortReplies(t, 1)
	rng := rand.New(rand.NewPCG(5, 8))
	ws := genWorkload(t, rng, 6, 120)
	e := newEnv(t)
	half := len(ws) / 2
	e.publish(ws[:half]...)
	r := e.start(Config{BatchSize: 40})
	e.waitCheckpoint(e.lastSeq())
	require.NoError(t, r.stop(t))
	// A new instance has an empty cache and non-empty buckets: it reads
	// every record its batches touch from KV, in short replies.
	e.publish(ws[half:]...)
	e.start(Config{BatchSize: 40})
	e.waitCheckpoint(e.lastSeq())
	e.requireLedger(buildModel(wireStored(ws)))
}

// hugeInvalid is an event body of about size bytes that breaks the
// contract only by its size (an error.message far over 1,024 bytes).
func hugeInvalid(t testing.TB, n, size int) wire {
	t.Helper()
	ev := evSpec{n: n, session: "S-bad", request: fmt.Sprintf("R-bad-%d", n), attempt: 0}.event()
	ev.Error.Message = strings.Repeat("x", size)
	data, err := events.Marshal(ev)
	require.NoError(t, err)
	return wire{subject: events.Subject(ev.SessionID, ev.RequestID), data: data, msgID: ev.EventID}
}

// The hostile inputs: in a stream created before LEDGER_ATTEMPTS had a
// MaxMsgSize, bodies of 700 KiB are rejected as too_large, each recorded
// once with the first 64 KiB of its body and its original size; the fat
// request is recorded exactly; events published after them all count. A
// stream created now refuses those bodies outright.
func TestHostileInputs(t *testing.T) {
	e := newEnvOn(t, true)
	const bad = 40
	var ws []wire
	ws = append(ws, evSpec{n: 1, session: "S1", request: "R-before", attempt: 0, success: true, in: 3, out: 4}.wire(t))
	for i := range bad {
		ws = append(ws, hugeInvalid(t, 10+i, 700<<10))
	}
	ws = append(ws, fatRequest(t, "S-fat", "R-fat", 100)...)
	for i := range 10 {
		ws = append(ws, evSpec{n: 2000 + i, session: "S2", request: fmt.Sprintf("R-after-%d", i), attempt: 0, success: true, in: 1, out: 2}.wire(t))
	}
	e.publish(ws...)
	e.start(Config{})
	e.waitCheckpoint(e.lastSeq())
	m := buildModel(wireStored(ws))
	require.Len(t, m.rejected, bad)
	e.requireLedger(m)
	e.requireStoredLog("R-fat", ws[1+bad:1+bad+events.MaxAttempt+1])

	rej, err := e.js.Stream(context.Background(), names.RejectedStream)
	require.NoError(t, err)
	for i := range bad {
		orig := ws[1+i]
		got, err := rej.GetMsg(context.Background(), uint64(i+1))
		require.NoError(t, err)
		require.Equal(t, events.RejectedSubject(events.ReasonTooLarge, uint64(i+2)), got.Subject)
		require.Equal(t, orig.data[:events.MaxEventBytes], got.Data, "the first 64 KiB of the body, byte for byte")
		require.Equal(t, strconv.Itoa(len(orig.data)), got.Header.Get(events.HeaderOriginalSize))
		require.Equal(t, fmt.Sprintf("the body is %d bytes; an event body is at most 65536 bytes (64 KiB)", len(orig.data)),
			got.Header.Get(events.HeaderRejectDetail))
		require.Equal(t, orig.subject, got.Header.Get(events.HeaderOriginalSubject))
	}

	// A stream created now refuses such a body.
	fresh := newEnvOn(t, false)
	m2 := nats.NewMsg(ws[1].subject)
	m2.Data = ws[1].data
	_, err = fresh.js.PublishMsg(context.Background(), m2)
	var apiErr *jetstream.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, jetstream.JSErrCodeStreamMessageExceedsMaximum, apiErr.ErrorCode)
}

// A rejected body that the contract allows is recorded whole, with no
// original size; details and subjects are cut to their bounds.
func TestRejectionBounds(t *testing.T) {
	small := []byte(`{"schema":"nope"}`)
	kept, size := RejectionBody(small)
	require.Equal(t, small, kept)
	require.Zero(t, size)
	whole := make([]byte, events.MaxEventBytes)
	kept, size = RejectionBody(whole)
	require.Len(t, kept, events.MaxEventBytes)
	require.Zero(t, size)
	big := make([]byte, events.MaxEventBytes+1)
	big[0] = 'x'
	kept, size = RejectionBody(big)
	require.Len(t, kept, events.MaxEventBytes)
	require.Equal(t, events.MaxEventBytes+1, size)
	big[0] = 'y'
	require.Equal(t, byte('x'), kept[0], "a cut body is a copy: the message can be freed")

	h := nats.Header{}
	setOriginalSize(h, &rejection{})
	require.Empty(t, h)
	setOriginalSize(h, &rejection{size: 716800})
	require.Equal(t, "716800", h.Get(events.HeaderOriginalSize))

	require.Equal(t, "abc", clipText("abc", 3))
	clipped := clipText(strings.Repeat("é", 10), 8)
	require.Equal(t, "éé…", clipped, "cut at a character boundary")
	require.LessOrEqual(t, len(clipped), 8)
}

// The intake holds at most its limit in bytes (and its capacity in
// messages): a put waits until the batch loop has taken enough out.
func TestIntakeBoundsBytes(t *testing.T) {
	rejected := func(size int) fetched {
		return fetched{seq: 1, err: fmt.Errorf("bad"), subject: "s", data: make([]byte, size)}
	}
	one := rejected(1000)
	limit := 3*one.cost() + 10
	in := newIntake(100, limit)
	stop := make(chan struct{})
	defer close(stop)
	put := make(chan struct{})
	go func() {
		for range 10 {
			in.put(rejected(1000), stop)
			put <- struct{}{}
		}
	}()
	for range 3 {
		<-put
	}
	select {
	case <-put:
		t.Fatal("a fourth message went in over the byte limit")
	case <-time.After(50 * time.Millisecond):
	}
	require.Len(t, in.ch, 3)
	// Taking them out makes room: the producer goes on (fill may already
	// see the next ones).
	batch := in.fill([]fetched{<-in.ch}, 100)
	require.GreaterOrEqual(t, len(batch), 3, "fill takes what is queued")
	for range 3 {
		<-put
	}
	// A message larger than the limit still passes when the intake is
	// empty.
	in2 := newIntake(10, 10)
	in2.put(rejected(1000), stop)
	require.Len(t, in2.ch, 1)
	// A batch stops once it holds batchBytes.
	in3 := newIntake(10, 2*batchBytes)
	in3.put(rejected(batchBytes), stop)
	in3.put(fetched{seq: 2}, stop)
	require.Len(t, in3.fill([]fetched{<-in3.ch}, 10), 1)
	require.Len(t, in3.ch, 1)
}
