package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/projection"
)

// ErrSwitching means a rebuild was switching the live ledger over while
// Verify read it, so the live records are a mix of two projections; run
// Verify again once the switch is done.
var ErrSwitching = errors.New("replay: a rebuild is switching the live ledger over")

// ErrIncomplete means the stream no longer holds every event the live
// ledger was projected from (the stream's MaxAge or a purge removed its
// start), so a recomputation cannot reproduce the ledger.
var ErrIncomplete = errors.New("replay: the stream no longer holds every event")

// Record kinds in a Diff.
const (
	KindSession = "session"
	KindRequest = "request"
)

// FieldRecord is the Diff field of a record that exists on one side only.
const FieldRecord = "(record)"

// Diff is one field of one record on which the live ledger and the
// recomputation disagree.
type Diff struct {
	Kind       string `json:"kind"` // KindSession or KindRequest
	ID         string `json:"id"`
	Field      string `json:"field"` // the contract's JSON name, dotted for usage and billed
	Live       string `json:"live"`
	Recomputed string `json:"recomputed"`
	// Delta is live minus recomputed for numeric fields.
	Delta *int64 `json:"delta,omitempty"`
	// Seq is the stream sequence both sides were compared at.
	Seq uint64 `json:"seq"`
}

// Drift is the outcome of Verify.
type Drift struct {
	// Checkpoint is the live checkpoint when Verify started. Records the
	// live aggregator had not rewritten since are compared with the
	// recomputation at this sequence; records it wrote later are compared at
	// the sequence of the batch that wrote them (their own watermark).
	Checkpoint      uint64 `json:"checkpoint"`
	SessionsChecked int    `json:"sessions_checked"`
	RequestsChecked int    `json:"requests_checked"`
	SessionsDiffer  int    `json:"sessions_differ"`
	RequestsDiffer  int    `json:"requests_differ"`
	// UsageDelta and BilledDelta sum live minus recomputed over the
	// sessions; the token deltas are input plus output tokens (the cache
	// counts are parts of the input).
	UsageDelta       events.Usage `json:"usage_delta"`
	BilledDelta      events.Usage `json:"billed_delta"`
	UsageTokenDelta  int64        `json:"usage_token_delta"`
	BilledTokenDelta int64        `json:"billed_token_delta"`
	// Diffs are sorted by kind (sessions first), ID and field.
	Diffs []Diff `json:"differences"`
}

// Identical reports whether no record differs.
func (d *Drift) Identical() bool { return d.SessionsDiffer == 0 && d.RequestsDiffer == 0 }

// liveRecord is a live record's contract fields with its watermark.
type liveRecord[V any] struct {
	view V
	seq  uint64
}

// Verify recomputes the ledger from the whole stream under the current
// code (or o.Apply) in memory, never writing anything, and compares it with
// the live ledger_requests and ledger_sessions while the live aggregator
// keeps running. Both sides are compared at one stream sequence per record:
// the live checkpoint read at the start for records written at or before
// it, else the watermark of the batch that last wrote the record, at which
// the record is exactly the projection of the events up to it.
func Verify(ctx context.Context, js jetstream.JetStream, o Options) (*Drift, error) {
	if err := checkNoSwitch(ctx, js); err != nil {
		return nil, err
	}
	cp, err := projection.ReadCheckpoint(ctx, js)
	if err != nil {
		return nil, err
	}
	stream, info, err := openStream(ctx, js)
	if err != nil {
		return nil, err
	}
	if cp > info.State.LastSeq {
		return nil, fmt.Errorf("%w: the live checkpoint is %d but %s ends at %d",
			projection.ErrInvariant, cp, events.AttemptsStream, info.State.LastSeq)
	}
	if cp > 0 && info.State.FirstSeq > 1 {
		return nil, fmt.Errorf("%w: %s starts at sequence %d, so events 1 to %d cannot be replayed",
			ErrIncomplete, events.AttemptsStream, info.State.FirstSeq, info.State.FirstSeq-1)
	}

	// The live records are read while the stream is replayed up to the
	// checkpoint: one is the server's work, the other mostly ours.
	type liveSide struct {
		reqs map[string]liveRecord[projection.RequestView]
		sess map[string]liveRecord[projection.SessionView]
		err  error
	}
	liveCh := make(chan liveSide, 1)
	rctx, cancelRead := context.WithCancel(ctx)
	defer cancelRead()
	go func() {
		var l liveSide
		l.reqs, l.err = readLive(rctx, js, events.RequestsBucket, decodeRequest)
		if l.err == nil {
			l.sess, l.err = readLive(rctx, js, events.SessionsBucket, decodeSession)
		}
		liveCh <- l
	}()
	mem := NewMemory(o.Apply)
	err = scan(ctx, stream, 1, cp, o.Progress, func(m stored) bool {
		mem.Apply(m.seq, m.subject, m.data)
		return true
	})
	if err != nil {
		cancelRead()
		<-liveCh
		return nil, err
	}
	live := <-liveCh
	if live.err != nil {
		return nil, live.err
	}
	if err := checkNoSwitch(ctx, js); err != nil {
		return nil, err
	}

	// Records the live aggregator wrote after cp are compared at their own
	// sequence, so the replay goes on to the highest of those.
	type late struct {
		kind string
		id   string
		seq  uint64
	}
	var lates []late
	target := cp
	for id, r := range live.reqs {
		if r.seq > cp {
			lates = append(lates, late{KindRequest, id, r.seq})
			target = max(target, r.seq)
		}
	}
	for id, s := range live.sess {
		if s.seq > cp {
			lates = append(lates, late{KindSession, id, s.seq})
			target = max(target, s.seq)
		}
	}
	sort.Slice(lates, func(i, j int) bool { return lates[i].seq < lates[j].seq })

	d := &Drift{Checkpoint: cp}
	c := &comparer{d: d, mem: mem, diffReq: map[string]bool{}, diffSes: map[string]bool{}}
	c.early(live.reqs, live.sess, cp)
	next := 0
	lateUpTo := func(seq uint64) { // compares the late records written before seq
		for ; next < len(lates) && lates[next].seq < seq; next++ {
			l := lates[next]
			if l.kind == KindRequest {
				c.request(l.id, live.reqs[l.id], true, l.seq)
			} else {
				c.session(l.id, live.sess[l.id], true, l.seq)
			}
		}
	}
	err = scan(ctx, stream, cp+1, target, o.Progress, func(m stored) bool {
		lateUpTo(m.seq)
		mem.Apply(m.seq, m.subject, m.data)
		return true
	})
	if err != nil {
		return nil, err
	}
	if mem.Seq() < target && target > cp {
		return nil, fmt.Errorf("%w: the live ledger has applied stream sequence %d but %s ends at %d",
			projection.ErrInvariant, target, events.AttemptsStream, mem.Seq())
	}
	lateUpTo(target + 1)
	d.RequestsChecked = len(live.reqs) + c.onlyRecomputedReqs
	d.SessionsChecked = len(live.sess) + c.onlyRecomputedSess
	d.RequestsDiffer, d.SessionsDiffer = len(c.diffReq), len(c.diffSes)
	d.UsageTokenDelta = d.UsageDelta.InputTokens + d.UsageDelta.OutputTokens
	d.BilledTokenDelta = d.BilledDelta.InputTokens + d.BilledDelta.OutputTokens
	sort.SliceStable(d.Diffs, func(i, j int) bool {
		a, b := d.Diffs[i], d.Diffs[j]
		if a.Kind != b.Kind {
			return a.Kind == KindSession
		}
		return a.ID < b.ID
	})
	return d, nil
}

func decodeRequest(data []byte) (projection.RequestView, uint64, error) {
	var r struct {
		projection.RequestView
		Seq uint64 `json:"seq"`
	}
	err := json.Unmarshal(data, &r)
	return r.RequestView, r.Seq, err
}

func decodeSession(data []byte) (projection.SessionView, uint64, error) {
	var s projection.Session
	err := json.Unmarshal(data, &s)
	return s.View(), s.Seq, err
}

// comparer compares live records with the in-memory projection at its
// current sequence.
type comparer struct {
	d                                      *Drift
	mem                                    *Memory
	diffReq, diffSes                       map[string]bool
	onlyRecomputedReqs, onlyRecomputedSess int
}

// early compares every record the live aggregator had not rewritten after
// checkpoint cp, and finds the records it should have had by cp but lacks.
// The memory is at cp.
func (c *comparer) early(reqs map[string]liveRecord[projection.RequestView], sess map[string]liveRecord[projection.SessionView], cp uint64) {
	for id, r := range reqs {
		if r.seq <= cp {
			c.request(id, r, true, cp)
		}
	}
	for _, id := range c.mem.RequestIDs() {
		if _, ok := reqs[id]; !ok {
			c.onlyRecomputedReqs++
			c.request(id, liveRecord[projection.RequestView]{}, false, cp)
		}
	}
	for id, s := range sess {
		if s.seq <= cp {
			c.session(id, s, true, cp)
		}
	}
	for _, id := range c.mem.SessionIDs() {
		if _, ok := sess[id]; !ok {
			c.onlyRecomputedSess++
			c.session(id, liveRecord[projection.SessionView]{}, false, cp)
		}
	}
}

func (c *comparer) request(id string, live liveRecord[projection.RequestView], inLive bool, seq uint64) {
	re, inMem := c.mem.Request(id)
	f := fields{c: c, kind: KindRequest, id: id, seq: seq, differ: c.diffReq}
	if !inLive || !inMem {
		f.add(FieldRecord, presence(inLive), presence(inMem), nil)
		return
	}
	l := live.view
	f.str("session_id", l.SessionID, re.SessionID)
	f.str("provider", l.Provider, re.Provider)
	f.str("model", l.Model, re.Model)
	f.str("status", l.Status, re.Status)
	f.num("attempts", int64(l.Attempts), int64(re.Attempts))
	f.num("winning_attempt", int64(l.WinningAttempt), int64(re.WinningAttempt))
	f.usage("usage", l.Usage, re.Usage)
	f.usage("billed", l.Billed, re.Billed)
	f.time("first_started_at", l.FirstStartedAt, re.FirstStartedAt)
	f.time("last_finished_at", l.LastFinishedAt, re.LastFinishedAt)
}

func (c *comparer) session(id string, live liveRecord[projection.SessionView], inLive bool, seq uint64) {
	re, inMem := c.mem.Session(id)
	f := fields{c: c, kind: KindSession, id: id, seq: seq, differ: c.diffSes}
	if inLive != inMem {
		f.add(FieldRecord, presence(inLive), presence(inMem), nil)
	}
	// A missing record counts as zero totals, so the deltas still add up.
	l := live.view.Totals
	f.num("requests", l.Requests, re.Requests)
	f.num("succeeded", l.Succeeded, re.Succeeded)
	f.num("failed", l.Failed, re.Failed)
	f.num("pending", l.Pending, re.Pending)
	f.num("attempts", l.Attempts, re.Attempts)
	f.usage("usage", l.Usage, re.Usage)
	f.usage("billed", l.Billed, re.Billed)
	c.d.UsageDelta = c.d.UsageDelta.Add(l.Usage.Sub(re.Usage))
	c.d.BilledDelta = c.d.BilledDelta.Add(l.Billed.Sub(re.Billed))
}

// fields records the differing fields of one record.
type fields struct {
	c      *comparer
	kind   string
	id     string
	seq    uint64
	differ map[string]bool // the records of this kind that differ
}

func (f fields) add(field, live, recomputed string, delta *int64) {
	f.differ[f.id] = true
	f.c.d.Diffs = append(f.c.d.Diffs, Diff{Kind: f.kind, ID: f.id, Field: field, Live: live, Recomputed: recomputed, Delta: delta, Seq: f.seq})
}

func (f fields) str(field, live, recomputed string) {
	if live != recomputed {
		f.add(field, live, recomputed, nil)
	}
}

func (f fields) num(field string, live, recomputed int64) {
	if live != recomputed {
		delta := live - recomputed
		f.add(field, strconv.FormatInt(live, 10), strconv.FormatInt(recomputed, 10), &delta)
	}
}

func (f fields) time(field string, live, recomputed time.Time) {
	if !live.Equal(recomputed) {
		f.add(field, live.UTC().Format(time.RFC3339Nano), recomputed.UTC().Format(time.RFC3339Nano), nil)
	}
}

func (f fields) usage(prefix string, live, recomputed events.Usage) {
	f.num(prefix+".input_tokens", live.InputTokens, recomputed.InputTokens)
	f.num(prefix+".output_tokens", live.OutputTokens, recomputed.OutputTokens)
	f.num(prefix+".cache_read_input_tokens", live.CacheReadInputTokens, recomputed.CacheReadInputTokens)
	f.num(prefix+".cache_creation_input_tokens", live.CacheCreationInputTokens, recomputed.CacheCreationInputTokens)
}

func presence(ok bool) string {
	if ok {
		return "present"
	}
	return "absent"
}

// readLive reads every record of a live bucket with its watermark.
func readLive[V any](ctx context.Context, js jetstream.JetStream, bucket string, decode func([]byte) (V, uint64, error)) (map[string]liveRecord[V], error) {
	out := map[string]liveRecord[V]{}
	err := projection.ReadAll(ctx, js, bucket, func(key string, value []byte) error {
		v, seq, err := decode(value)
		if err != nil {
			return fmt.Errorf("replay: record %s/%s is not readable: %w", bucket, key, err)
		}
		out[key] = liveRecord[V]{view: v, seq: seq}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// checkNoSwitch fails with ErrSwitching while a rebuild's switch record
// exists.
func checkNoSwitch(ctx context.Context, js jetstream.JetStream) error {
	switching, err := projection.Switching(ctx, js)
	if err != nil {
		return err
	}
	if switching {
		return fmt.Errorf("%w; run verify again when it is done", ErrSwitching)
	}
	return nil
}
