package projection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/events"
)

// batcher applies batches of stream messages in stream order. It owns the
// record cache and the checkpoint; one lease term has one batcher, and a
// failed batch ends it (the next term starts with an empty cache from the
// stored checkpoint).
//
// Batches are pipelined two deep: while one batch is committed (by its own
// goroutine, see commit), the next one is prepared (read, applied and
// encoded) on top of the records the committing batch is writing. A batch
// is sent only once the previous one is fully committed, so the writes
// reach the server in exactly the order of unpipelined batches.
type batcher struct {
	agg *Aggregator
	res *resources
	// prepared is the last stream sequence of the last prepared batch.
	// Owned by the goroutine that prepares batches.
	prepared uint64
	// cellKeys are the keys of the cells of the requests (loadRollups).
	cellKeys CellKeys
	cache    *cache
	// apply is the rule of the term: Priced(the term's catalog), or
	// Config.Apply.
	apply ApplyFunc
	// absentReq and absentSes are set when the bucket was empty at the
	// start of the term; see absentFilter.
	absentReq, absentSes, absentRol *absentFilter
	// inflight is the batch being committed, if any; its records are the
	// newest state of every key it touches.
	inflight *job

	// Owned by the committing goroutine (one at a time, each started
	// after the previous one has ended): the term's fences and checkpoint,
	// and the last recorded rejection.
	term        *term
	rejectFloor uint64
}

type rejection struct {
	seq     uint64
	reason  events.Reason
	detail  string
	subject string
	data    []byte
	size    int // the body's size when data keeps only its start (RejectionBody); else 0
}

type reqWork struct {
	rec  *Request // working copy
	rev  uint64   // revision as stored; 0 when absent
	held Totals   // what the session held for the stored version
	// cells are the keys of the request's rollup cells, one per grain the
	// term writes ("" when none: no rollups, a grain the term does not
	// write, or a record written before the rollups); heldCell what each
	// held for the stored version (held when there is no cell).
	cells    [numGrains]string
	heldCell [numGrains]Totals
	changed  bool
	// prev is the in-flight batch's work on the same key, when the record
	// came from there: its revision is known once that batch commits.
	prev *reqWork
	// was is the record before the batch (nil: absent), and errs the
	// failed events that changed it; kept only for a ChangeObserver.
	was  *Request
	errs []*events.Attempt
}

type rolWork struct {
	rec   *Rollup // working copy
	rev   uint64
	delta Totals
	dirty bool
	prev  *rolWork // as reqWork.prev
}

type sesWork struct {
	rec   *Session // working copy
	rev   uint64
	delta Totals
	dirty bool
	prev  *sesWork // as reqWork.prev
}

// job is a prepared batch: every record it writes is computed and
// encoded; only the revisions of keys the in-flight batch writes are
// filled in later (resolve).
type job struct {
	q          uint64    // last stream sequence of the batch
	inHand     time.Time // when its first event was in hand
	events     int
	rejects    []rejection
	reqs       map[string]*reqWork
	sess       map[string]*sesWork
	reqPuts    []put
	reqWritten []*reqWork
	sesPuts    []put
	sesWritten []*sesWork
	rols       map[string]*rolWork
	rolPuts    []put
	rolWritten []*rolWork
}

type accepted struct {
	seq uint64
	ev  *events.Attempt
}

// fetched is a stream message as the consumer hands it over: decoded and
// checked (Accept) in the consumer's goroutine, so that decoding the next
// batch overlaps with committing the current one. The message itself is
// kept only when it is rejected (its subject and body are recorded); an
// accepted one is dropped at once, which keeps the read-ahead small.
//
// A rejected body over events.MaxEventBytes (possible in a stream created
// before LEDGER_ATTEMPTS had a MaxMsgSize) keeps only its start, and a
// subject only its first events.MaxRejectSubjectBytes, so that the
// rejection fits LEDGER_REJECTED and the read-ahead stays small.
type fetched struct {
	seq     uint64
	ev      *events.Attempt // nil when rejected
	err     error           // why it is rejected
	subject string          // of a rejected message
	data    []byte          // of a rejected message, cut by RejectionBody
	size    int             // as rejection.size
	metaErr error           // the message has no JetStream metadata
}

func fetch(m jetstream.Msg, labelSets *events.LabelInterner) fetched {
	md, err := m.Metadata()
	if err != nil {
		return fetched{metaErr: err}
	}
	f := fetched{seq: md.Sequence.Stream}
	f.ev, f.err = accept(m.Subject(), m.Data(), labelSets)
	if f.err != nil {
		f.subject = clipText(m.Subject(), events.MaxRejectSubjectBytes)
		f.data, f.size = RejectionBody(m.Data())
	}
	return f
}

// prepare reads, applies and encodes a batch on top of the in-flight one
// (nil when the batch holds nothing new): split the messages, load the
// records they touch, fold the events in, encode what changed.
func (b *batcher) prepare(ctx context.Context, msgs []fetched) (*job, error) {
	items, rejects, q, err := b.split(msgs)
	if err != nil || q == 0 {
		return nil, err
	}
	reqs, reqOrder, err := b.loadRequests(ctx, items)
	if err != nil {
		return nil, err
	}
	sess, sesOrder, err := b.loadSessions(ctx, reqs, reqOrder)
	if err != nil {
		return nil, err
	}
	rols, rolOrder, err := b.loadRollups(ctx, items, reqs, reqOrder)
	if err != nil {
		return nil, err
	}
	if err := b.fault(FaultAfterLoad); err != nil {
		return nil, err
	}
	if rejects, err = b.fold(ctx, items, reqs, rejects); err != nil {
		return nil, err
	}
	j := &job{q: q, events: len(items), rejects: rejects, reqs: reqs, sess: sess, rols: rols}
	// Records are encoded into shared chunks (they stay referenced by the
	// puts until acknowledged).
	var buf chunks
	if err := j.encodeRequests(reqOrder, &buf, b.term.rules); err != nil {
		return nil, err
	}
	j.encodeSessions(sesOrder, &buf, b.term.rules, b.agg.log)
	j.encodeRollups(rolOrder, &buf, b.term.rules)
	b.prepared = q
	return j, nil
}

// split sorts a batch's new messages (those past the last prepared one)
// into accepted events and rejections, and returns the last sequence of
// the batch (0: nothing new). The stream holds only attempts and denies
// deletes, so its sequences are consecutive: a new message that is not
// the one after the last is a gap (events removed by retention before
// they were applied), never skipped in silence.
func (b *batcher) split(msgs []fetched) (items []accepted, rejects []rejection, q uint64, err error) {
	next := b.prepared + 1
	for i := range msgs {
		m := &msgs[i]
		if m.metaErr != nil {
			return nil, nil, 0, fmt.Errorf("projection: message without JetStream metadata: %w", m.metaErr)
		}
		if m.seq < next {
			continue // delivered again; already applied
		}
		if m.seq > next {
			if err := b.agg.gap(next, m.seq-1, next-1); err != nil {
				return nil, nil, 0, err
			}
		}
		next = m.seq + 1
		q = m.seq
		if m.err != nil {
			rejects = append(rejects, rejectionOf(m))
			continue
		}
		items = append(items, accepted{seq: m.seq, ev: m.ev})
	}
	return items, rejects, q, nil
}

// fold folds the accepted events into their requests' records (Fold),
// adding a session_conflict rejection for each event Fold refuses.
func (b *batcher) fold(ctx context.Context, items []accepted, reqs map[string]*reqWork, rejects []rejection) ([]rejection, error) {
	observed := b.observesChanges()
	for i := range items {
		it := &items[i]
		w := reqs[it.ev.RequestID]
		ok, changed := Fold(w.rec, it.ev, b.apply)
		if ok {
			w.changed = w.changed || changed
			if changed {
				w.noteFolded(it.ev, observed)
			}
			continue
		}
		// The body was dropped when the event was accepted; the contract
		// records it byte for byte, so it is read back.
		m, err := b.res.stream.GetMsg(ctx, it.seq)
		if err != nil {
			return nil, fmt.Errorf("projection: reading the body of conflicting event %d: %w", it.seq, err)
		}
		rejects = append(rejects, rejection{
			seq: it.seq, reason: events.ReasonSessionConflict,
			detail:  fmt.Sprintf("request %q is already recorded under session %q; this event names session %q", it.ev.RequestID, w.rec.SessionID, it.ev.SessionID),
			subject: events.Subject(it.ev.SessionID, it.ev.RequestID),
			data:    m.Data,
		})
	}
	return rejects, nil
}

// encodeRequests encodes the request records the batch changed (or whose
// held contribution differs from the current one in their session or
// their rollup) and adds each change of contribution to its session's
// delta and its rollup's.
func (j *job) encodeRequests(order []string, buf *chunks, rules int) error {
	j.reqPuts = make([]put, 0, len(order))
	for _, key := range order {
		w := j.reqs[key]
		now := w.rec.Contribution()
		var cs [numGrains]*rolWork // nil for a grain without a cell
		inStep := !w.changed && now == w.held
		for g, key := range w.cells {
			if key != "" {
				cs[g] = j.rols[key]
				inStep = inStep && now == w.heldCell[g]
			}
		}
		if inStep {
			continue
		}
		s := j.sess[w.rec.SessionID]
		if w.changed && s.rec.Seq >= j.q {
			return fmt.Errorf("%w: session %q absorbed batch %d but request %q gains events from batch %d", ErrInvariant, s.rec.SessionID, s.rec.Seq, key, j.q)
		}
		for g, c := range cs {
			if w.changed && c != nil && c.rec.Seq >= j.q {
				return fmt.Errorf("%w: rollup %q absorbed batch %d but request %q gains events from batch %d", ErrInvariant, w.cells[g], c.rec.Seq, key, j.q)
			}
		}
		w.rec.Seq = j.q
		w.rec.Rules = rules
		w.rec.Held = w.held
		s.delta = s.delta.Add(now.Sub(w.held))
		s.dirty = true
		var helds [numGrains]Totals
		for g, c := range cs {
			helds[g] = w.held
			if c != nil {
				helds[g] = w.heldCell[g]
				c.delta = c.delta.Add(now.Sub(helds[g]))
				c.dirty = true
			}
		}
		w.rec.setHelds(helds[GrainHour], helds[GrainDay], helds[GrainModelHour])
		j.reqPuts = append(j.reqPuts, put{key: key, value: buf.add(w.rec.appendJSON)})
		j.reqWritten = append(j.reqWritten, w)
	}
	return nil
}

// encodeSessions encodes the session records whose totals the batch
// changed.
func (j *job) encodeSessions(order []string, buf *chunks, rules int, log *slog.Logger) {
	for _, key := range order {
		s := j.sess[key]
		if !s.dirty || s.delta == (Totals{}) {
			continue
		}
		was := s.rec.Saturated
		s.rec.Totals = s.rec.Totals.Add(s.delta)
		if s.rec.Saturated && !was {
			log.Warn("aggregator: a session's sums passed 2^63-1 and stay there (saturated)", "session", key, "seq", j.q)
		}
		s.rec.Seq = max(s.rec.Seq, j.q)
		s.rec.Rules = rules
		j.sesPuts = append(j.sesPuts, put{key: key, value: buf.add(s.rec.appendJSON)})
		j.sesWritten = append(j.sesWritten, s)
	}
}

// encodeRollups encodes the rollup records whose totals the batch
// changed, as encodeSessions.
func (j *job) encodeRollups(order []string, buf *chunks, rules int) {
	for _, key := range order {
		c := j.rols[key]
		if !c.dirty || c.delta == (Totals{}) {
			continue
		}
		c.rec.Totals = c.rec.Totals.Add(c.delta)
		c.rec.Seq = max(c.rec.Seq, j.q)
		c.rec.Rules = rules
		j.rolPuts = append(j.rolPuts, put{key: key, value: buf.add(c.rec.appendJSON)})
		j.rolWritten = append(j.rolWritten, c)
	}
}

// chunks hands out encoded records from 64 KiB chunks: one allocation per
// hundred records or so, and no copying as a single buffer would grow.
type chunks struct{ cur []byte }

const chunkSize = 64 << 10

// add appends a record with enc and returns it.
func (c *chunks) add(enc func([]byte) []byte) []byte {
	if cap(c.cur)-len(c.cur) < 4<<10 {
		c.cur = make([]byte, 0, chunkSize)
	}
	n := len(c.cur)
	c.cur = enc(c.cur)
	return c.cur[n:len(c.cur):len(c.cur)]
}

// resolve fills in the revisions the job's writes expect, once the batch
// it was prepared on top of has committed.
func (j *job) resolve() {
	for _, w := range j.reqs {
		if w.prev != nil {
			w.rev, w.prev = w.prev.rev, nil
		}
	}
	for _, s := range j.sess {
		if s.prev != nil {
			s.rev, s.prev = s.prev.rev, nil
		}
	}
	for _, c := range j.rols {
		if c.prev != nil {
			c.rev, c.prev = c.prev.rev, nil
		}
	}
	for i, w := range j.reqWritten {
		j.reqPuts[i].rev = w.rev
	}
	for i, s := range j.sesWritten {
		j.sesPuts[i].rev = s.rev
	}
	for i, c := range j.rolWritten {
		j.rolPuts[i].rev = c.rev
	}
}

// commit writes a resolved job: rejections, then requests, then sessions,
// then rollups, then the checkpoint. Any prefix of this sequence is a state the next
// batch recovers from (see the package comment). It runs on its own
// goroutine and touches only the job's puts and the batcher's commit
// fields; on success every put holds its new revision.
//
// Every write is conditional on the term's fences, and none is sent once
// the lease may have lapsed.
func (b *batcher) commit(ctx context.Context, j *job) error {
	t := b.term
	if err := b.recordRejects(ctx, j.rejects); err != nil {
		return err
	}
	if err := b.fault(FaultAfterRejects); err != nil {
		return err
	}
	if err := b.fault(FaultBeforeWrites); err != nil {
		return err
	}
	if err := b.putHalves(ctx, b.res.requests, j.reqPuts, &t.reqLast, FaultMidRequests); err != nil {
		return err
	}
	if err := b.fault(FaultBetweenBuckets); err != nil {
		return err
	}
	if err := b.putHalves(ctx, b.res.sessions, j.sesPuts, &t.sesLast, FaultMidSessions); err != nil {
		return err
	}
	if err := b.fault(FaultAfterSessions); err != nil {
		return err
	}
	if b.res.rollups != nil {
		if err := b.putHalves(ctx, b.res.rollups, j.rolPuts, &t.rolLast, FaultMidRollups); err != nil {
			return err
		}
	}
	if err := b.fault(FaultBeforeCheckpoint); err != nil {
		return err
	}
	if err := t.writeCheckpoint(ctx, b.res.stateW, checkpoint{Seq: j.q}); err != nil {
		return fmt.Errorf("projection: committing checkpoint %d: %w", j.q, err)
	}
	b.agg.applied.Store(j.q)
	b.agg.stats.batches.Add(1)
	b.agg.stats.events.Add(uint64(j.events))
	if o := b.agg.cfg.Observer; o != nil {
		o.BatchCommitted(j.events, time.Since(j.inHand))
		b.reportChanges(j)
	}
	return b.fault(FaultAfterCheckpoint)
}

// finish records a committed job's revisions and keeps its records in the
// cache.
func (b *batcher) finish(j *job) {
	for i, w := range j.reqWritten {
		w.rev = j.reqPuts[i].rev
		if b.absentReq != nil {
			b.absentReq.add(j.reqPuts[i].key)
		}
	}
	for i, s := range j.sesWritten {
		s.rev = j.sesPuts[i].rev
		if b.absentSes != nil {
			b.absentSes.add(j.sesPuts[i].key)
		}
	}
	for key, w := range j.reqs {
		b.cache.putRequest(key, cachedRequest{rec: w.rec, rev: w.rev})
	}
	for key, s := range j.sess {
		b.cache.putSession(key, cachedSession{rec: s.rec, rev: s.rev})
	}
	for i, c := range j.rolWritten {
		c.rev = j.rolPuts[i].rev
		if b.absentRol != nil {
			b.absentRol.add(j.rolPuts[i].key)
		}
	}
	for key, c := range j.rols {
		b.cache.putRollup(key, cachedRollup{rec: c.rec, rev: c.rev})
	}
}

func (b *batcher) fault(p FaultPoint) error { return seam(b.agg.cfg.Faults).hit(p) }

// putHalves writes puts in one pipelined round under the term's fence of
// the bucket (last); with a fault seam set, in two halves with the seam
// between them. Nothing is sent once the lease may have lapsed.
func (b *batcher) putHalves(ctx context.Context, bk *bucket, puts []put, last *uint64, mid FaultPoint) error {
	if err := b.term.valid(); err != nil {
		return err
	}
	if b.agg.cfg.Faults == nil || len(puts) < 2 {
		if err := bk.putAll(ctx, puts, last); err != nil {
			return err
		}
		return b.fault(mid)
	}
	h := len(puts) / 2
	if err := bk.putAll(ctx, puts[:h], last); err != nil {
		return err
	}
	if err := b.fault(mid); err != nil {
		return err
	}
	if err := b.term.valid(); err != nil {
		return err
	}
	return bk.putAll(ctx, puts[h:], last)
}

func (b *batcher) inflightRequest(key string) *reqWork {
	if b.inflight == nil {
		return nil
	}
	return b.inflight.reqs[key]
}

func (b *batcher) inflightSession(key string) *sesWork {
	if b.inflight == nil {
		return nil
	}
	return b.inflight.sess[key]
}

// loadRequests returns a working copy of every request the batch names,
// with its stored revision, in order of first appearance: from the
// in-flight batch, else the cache, else KV (keys missing from both are
// read in one batched round trip).
func (b *batcher) loadRequests(ctx context.Context, items []accepted) (map[string]*reqWork, []string, error) {
	reqs := make(map[string]*reqWork, len(items))
	order := make([]string, 0, len(items))
	var missing []string
	for i := range items {
		ev := items[i].ev
		if _, ok := reqs[ev.RequestID]; ok {
			continue
		}
		w := &reqWork{}
		if p := b.inflightRequest(ev.RequestID); p != nil {
			w.rec, w.prev, w.was = p.rec.clone(), p, p.rec
		} else if c, ok := b.cache.request(ev.RequestID); ok {
			w.rec, w.rev, w.was = c.rec.clone(), c.rev, c.rec
		} else {
			w.rec = NewRequest(ev.RequestID, ev.SessionID)
			if b.absentReq == nil || !b.absentReq.absent(ev.RequestID) {
				missing = append(missing, ev.RequestID)
			}
		}
		reqs[ev.RequestID] = w
		order = append(order, ev.RequestID)
	}
	found, err := b.res.requests.getMany(ctx, missing)
	if err != nil {
		return nil, nil, err
	}
	for key, st := range found {
		w := reqs[key]
		w.rev = st.rev
		if st.value == nil {
			continue // deleted: absent, but a write must name the marker's revision
		}
		var r Request
		if err := json.Unmarshal(st.value, &r); err != nil {
			return nil, nil, fmt.Errorf("%w: stored request %q is not readable: %v", ErrInvariant, key, err)
		}
		w.rec = &r
		if b.observesChanges() {
			w.was = r.clone()
		}
	}
	return reqs, order, nil
}

// loadSessions returns a working copy of the session of every request, and
// fills in what each session holds for its stored request.
func (b *batcher) loadSessions(ctx context.Context, reqs map[string]*reqWork, reqOrder []string) (map[string]*sesWork, []string, error) {
	sess := make(map[string]*sesWork)
	var order, missing []string
	for _, key := range reqOrder {
		id := reqs[key].rec.SessionID
		if _, ok := sess[id]; ok {
			continue
		}
		s := &sesWork{}
		if p := b.inflightSession(id); p != nil {
			cp := *p.rec
			s.rec, s.prev = &cp, p
		} else if c, hit := b.cache.session(id); hit {
			cp := *c.rec
			s.rec, s.rev = &cp, c.rev
		} else {
			s.rec = &Session{SessionView: SessionView{SessionID: id}}
			if b.absentSes == nil || !b.absentSes.absent(id) {
				missing = append(missing, id)
			}
		}
		sess[id] = s
		order = append(order, id)
	}
	found, err := b.res.sessions.getMany(ctx, missing)
	if err != nil {
		return nil, nil, err
	}
	for id, st := range found {
		s := sess[id]
		s.rev = st.rev
		if st.value == nil {
			continue
		}
		if err := json.Unmarshal(st.value, s.rec); err != nil {
			return nil, nil, fmt.Errorf("%w: stored session %q is not readable: %v", ErrInvariant, id, err)
		}
	}
	for _, key := range reqOrder {
		w := reqs[key]
		if w.rec.Exists() {
			w.held = heldBy(w.rec, sess[w.rec.SessionID].rec)
		}
	}
	return sess, order, nil
}

func (b *batcher) inflightRollup(key string) *rolWork {
	if b.inflight == nil {
		return nil
	}
	return b.inflight.rols[key]
}

// loadRollups returns a working copy of the rollup of every request that
// has one (nil without rollups), and fills in what each rollup holds for
// its stored request. A new request's cell is that of its first event in
// the batch (its first accepted event: Fold gives it that cell).
func (b *batcher) loadRollups(ctx context.Context, items []accepted, reqs map[string]*reqWork, reqOrder []string) (map[string]*rolWork, []string, error) {
	for _, key := range reqOrder {
		w := reqs[key]
		for g := range w.heldCell {
			w.heldCell[g] = w.held
		}
	}
	if b.res.rollups == nil {
		return nil, nil, nil
	}
	grains := Grains[:1]
	if b.term.allGrains {
		grains = Grains
	}
	rols := make(map[string]*rolWork)
	var order, missing []string
	add := func(w *reqWork, hour Cell) {
		keys := b.cellKeys.Keys(hour)
		for _, g := range grains {
			key := keys[g]
			w.cells[g] = key
			if _, ok := rols[key]; ok {
				continue
			}
			c := &rolWork{}
			if p := b.inflightRollup(key); p != nil {
				cp := *p.rec
				c.rec, c.prev = &cp, p
			} else if hit, ok := b.cache.rollup(key); ok {
				cp := *hit.rec
				c.rec, c.rev = &cp, hit.rev
			} else {
				c.rec = &Rollup{Cell: hour.In(g)}
				if b.absentRol == nil || !b.absentRol.absent(key) {
					missing = append(missing, key)
				}
			}
			rols[key] = c
			order = append(order, key)
		}
	}
	for _, key := range reqOrder {
		if cell, ok := reqs[key].rec.RollupCell(); ok {
			add(reqs[key], cell)
		}
	}
	for i := range items {
		ev := items[i].ev
		if w := reqs[ev.RequestID]; !w.rec.Exists() && w.cells[GrainHour] == "" {
			labels, rc := cellOf(ev)
			add(w, Cell{Hour: rc.Hour, Provider: rc.Provider, Model: rc.Model, Labels: labels})
		}
	}
	found, err := b.res.rollups.getMany(ctx, missing)
	if err != nil {
		return nil, nil, err
	}
	for key, st := range found {
		c := rols[key]
		c.rev = st.rev
		if st.value == nil {
			continue
		}
		var rec Rollup // decoded afresh: the cell's labels are shared, never written
		if err := rec.UnmarshalJSON(st.value); err != nil {
			return nil, nil, fmt.Errorf("%w: stored rollup %q is not readable: %v", ErrInvariant, key, err)
		}
		*c.rec = rec
	}
	for _, key := range reqOrder {
		w := reqs[key]
		if !w.rec.Exists() {
			continue
		}
		for g, cell := range w.cells {
			if cell != "" {
				w.heldCell[g] = heldByCell(w.rec, rols[cell].rec, Grain(g))
			}
		}
	}
	return rols, order, nil
}

func rejectionOf(m *fetched) rejection {
	r := rejection{seq: m.seq, subject: m.subject, data: m.data, size: m.size, reason: events.ReasonMalformedJSON, detail: m.err.Error()}
	var re *events.RejectError
	if errors.As(m.err, &re) {
		r.reason, r.detail = re.Reason, re.Detail
	}
	r.detail = clipText(r.detail, events.MaxRejectDetailBytes)
	return r
}

// recordRejects records each rejection once, in stream order, waiting for
// each to be stored before the next so that lastRejection is exact. Each
// expects the stream to end where the term knows it ends.
func (b *batcher) recordRejects(ctx context.Context, rejects []rejection) error {
	if len(rejects) == 0 {
		return nil
	}
	slices.SortFunc(rejects, func(x, y rejection) int { return cmpUint(x.seq, y.seq) })
	t := b.term
	for i, r := range rejects {
		if r.seq <= b.rejectFloor {
			continue // recorded before a crash
		}
		if err := t.valid(); err != nil {
			return err
		}
		m := nats.NewMsg(b.res.names.RejectedPrefix + string(r.reason) + "." + strconv.FormatUint(r.seq, 10))
		m.Data = r.data
		m.Header.Set(events.HeaderRejectReason, string(r.reason))
		m.Header.Set(events.HeaderRejectDetail, oneLine(r.detail))
		m.Header.Set(events.HeaderOriginalSubject, r.subject)
		m.Header.Set(headerOriginalSeq, strconv.FormatUint(r.seq, 10))
		setOriginalSize(m.Header, &r)
		ack, err := b.agg.cfg.JS.PublishMsg(ctx, m, jetstream.WithExpectLastSequence(t.rejLast))
		if err != nil {
			return fmt.Errorf("projection: recording rejection of sequence %d: %w", r.seq, err)
		}
		t.rejLast = ack.Sequence
		b.rejectFloor = r.seq
		b.agg.stats.rejected.Add(1)
		if o := b.agg.cfg.Observer; o != nil {
			o.Rejected(string(r.reason))
		}
		b.agg.log.Warn("aggregator: rejected event", "seq", r.seq, "reason", r.reason, "detail", r.detail)
		if i == 0 {
			if err := b.fault(FaultBetweenRejectsPut); err != nil {
				return err
			}
		}
	}
	return nil
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// oneLine makes a header value of a detail: no line breaks.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, s)
}
