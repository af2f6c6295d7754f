package projection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/pricing"
	"github.com/agentledger/ledger/internal/topology"
)

// wire is one message as published: what the model and the stream see.
type wire struct {
	subject string
	data    []byte
	msgID   string // "" publishes without Nats-Msg-Id
}

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// ulidAt makes a deterministic ULID: n orders them.
func ulidAt(n int) string {
	var id ulid.ULID
	_ = id.SetTime(uint64(t0.UnixMilli()) + uint64(n))
	return id.String()
}

type evSpec struct {
	n         int // event id ordinal
	session   string
	request   string
	attempt   int
	success   bool
	final     bool
	in, out   int64
	cacheRead int64
	labels    api.Labels
	hour      int // hours after t0 its attempt starts
}

// testModel is the model of event n: mostly one the default catalog
// prices, every fourth one without a price (its tokens are unpriced), so
// that the chaos tests cover both, and fallbacks between them.
func testModel(n int) string {
	if n%4 == 3 {
		return "claude-test"
	}
	return "claude-opus-4-5-20251101"
}

// modelPrice prices an attempt for the model: with the catalog directly,
// not through the projection's code.
func modelPrice(cat *pricing.Catalog, ev *events.Attempt) (pricing.Money, bool) {
	c, ok := cat.Price(pricing.Attempt{Provider: ev.Provider, Model: ev.Model, ServiceTier: ev.ServiceTier, At: ev.StartedAt, Usage: ev.Usage})
	return c.Total, ok
}

func (s evSpec) event() *events.Attempt {
	a := &events.Attempt{
		Schema:     events.SchemaV1,
		EventID:    ulidAt(s.n),
		RequestID:  s.request,
		SessionID:  s.session,
		Attempt:    s.attempt,
		Outcome:    events.OutcomeSuccess,
		Final:      true,
		Provider:   "anthropic",
		Model:      testModel(s.n),
		Usage:      events.Usage{InputTokens: s.in, OutputTokens: s.out, CacheReadInputTokens: s.cacheRead},
		StartedAt:  t0.Add(time.Duration(s.hour)*time.Hour + time.Duration(s.n)*time.Second),
		FinishedAt: t0.Add(time.Duration(s.hour)*time.Hour + time.Duration(s.n)*time.Second + 500*time.Millisecond),
		Labels:     s.labels,
	}
	if !s.success {
		a.Outcome = events.OutcomeError
		a.Final = s.final
		a.Error = &events.AttemptError{Kind: events.KindTimeout, Retryable: !s.final, Message: "timed out"}
	}
	return a
}

func (s evSpec) wire(t testing.TB) wire {
	t.Helper()
	a := s.event()
	data, err := events.Marshal(a)
	require.NoError(t, err)
	return wire{subject: events.Subject(a.SessionID, a.RequestID), data: data, msgID: a.EventID}
}

// env is one test's server, connection and topology.
type env struct {
	t  testing.TB
	nc *nats.Conn
	js jetstream.JetStream
	ss *natstest.Server
}

func newEnv(t testing.TB) *env {
	t.Helper()
	ss, nc, js := natstest.StartJS(t)
	_, err := topology.EnsureAttempts(context.Background(), js, topology.Config{})
	require.NoError(t, err)
	return &env{t: t, nc: nc, js: js, ss: ss}
}

func (e *env) publish(ws ...wire) {
	e.t.Helper()
	ctx := context.Background()
	for _, w := range ws {
		m := nats.NewMsg(w.subject)
		m.Data = w.data
		if w.msgID != "" {
			m.Header.Set(nats.MsgIdHdr, w.msgID)
		}
		_, err := e.js.PublishMsg(ctx, m)
		require.NoError(e.t, err)
	}
}

func (e *env) lastSeq() uint64 {
	e.t.Helper()
	s, err := e.js.Stream(context.Background(), names.AttemptsStream)
	require.NoError(e.t, err)
	info, err := s.Info(context.Background())
	require.NoError(e.t, err)
	return info.State.LastSeq
}

// running is an aggregator started by a test.
type running struct {
	agg    *Aggregator
	cancel context.CancelFunc
	done   chan error
}

func (e *env) start(cfg Config) *running {
	e.t.Helper()
	cfg.JS = e.js
	if cfg.LeaseTTL == 0 {
		// Short, so that takeovers are quick, but long enough that a
		// loaded 2-core machine under the race detector renews in time.
		cfg.LeaseTTL = time.Second
	}
	if cfg.RetryDelay == 0 {
		cfg.RetryDelay = 20 * time.Millisecond
	}
	agg, err := New(cfg)
	require.NoError(e.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{agg: agg, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- agg.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// stop cancels a running aggregator and returns what Run returned.
func (r *running) stop(t testing.TB) error {
	t.Helper()
	r.cancel()
	return waitDone(t, r.done, "the aggregator")
}

// waitStopped waits until a running aggregator's Run returns by itself,
// and returns its error.
func (r *running) waitStopped(t testing.TB) error {
	t.Helper()
	return waitDone(t, r.done, "the aggregator")
}

// waitDone returns the error done delivers within a minute, and puts it
// back for the cleanup that waits on done too.
func waitDone(t testing.TB, done chan error, what string) error {
	t.Helper()
	select {
	case err := <-done:
		done <- err
		return err
	case <-time.After(time.Minute):
		t.Fatalf("%s did not stop within a minute", what)
		return nil
	}
}

// waitCheckpoint waits until the stored checkpoint reaches seq.
func (e *env) waitCheckpoint(seq uint64) {
	e.t.Helper()
	require.Eventually(e.t, func() bool {
		cp, err := ReadCheckpoint(context.Background(), e.js)
		return err == nil && cp >= seq
	}, 30*time.Second, 5*time.Millisecond, "checkpoint never reached %d", seq)
}

// ledger reads both buckets: contract views keyed by ID.
func (e *env) ledger() (map[string]RequestView, map[string]SessionView) {
	e.t.Helper()
	ctx := context.Background()
	reqs := map[string]RequestView{}
	sess := map[string]SessionView{}
	for _, b := range []string{names.RequestsBucket, names.SessionsBucket} {
		kv, err := e.js.KeyValue(ctx, b)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			continue
		}
		require.NoError(e.t, err)
		lister, err := kv.ListKeys(ctx)
		require.NoError(e.t, err)
		for key := range lister.Keys() {
			entry, err := kv.Get(ctx, key)
			require.NoError(e.t, err)
			if b == names.RequestsBucket {
				var r Request
				require.NoError(e.t, json.Unmarshal(entry.Value(), &r))
				reqs[key] = r.View()
			} else {
				var s Session
				require.NoError(e.t, json.Unmarshal(entry.Value(), &s))
				sess[key] = s.View()
			}
		}
	}
	return reqs, sess
}

// rollups reads ledger_rollups (ReadRollups), keyed as the model keys
// them, without the seq and rules.
func (e *env) rollups() map[string]Rollup {
	e.t.Helper()
	out := map[string]Rollup{}
	for _, g := range Grains {
		all, err := ReadRollups(context.Background(), e.js, LiveNames(), RollupFilter{Grain: g})
		require.NoError(e.t, err)
		for _, c := range all {
			require.Equal(e.t, g, c.Grain, "ReadRollups of grain %s", g)
		}
		e.addRollups(out, all)
	}
	return out
}

// addRollups adds rollups to out, keyed as the model keys them, without
// the seq and rules.
func (e *env) addRollups(out map[string]Rollup, all []Rollup) {
	e.t.Helper()
	for _, c := range all {
		if len(c.Labels) == 0 {
			c.Labels = nil
		}
		k := modelCellKey(c.Cell)
		require.NotContains(e.t, out, k, "two records for one cell")
		c.Seq, c.Rules = 0, 0
		out[k] = c
	}
}

// rejections reads LEDGER_REJECTED: original sequence → reason, with a
// count per sequence to catch duplicates.
func (e *env) rejections() map[uint64][]string {
	e.t.Helper()
	ctx := context.Background()
	out := map[uint64][]string{}
	s, err := e.js.Stream(ctx, names.RejectedStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return out
	}
	require.NoError(e.t, err)
	info, err := s.Info(ctx)
	require.NoError(e.t, err)
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // deleted
		}
		require.NoError(e.t, err)
		orig, err := strconv.ParseUint(m.Header.Get(headerOriginalSeq), 10, 64)
		require.NoError(e.t, err)
		reason := m.Header.Get(events.HeaderRejectReason)
		require.Equal(e.t, events.RejectedSubject(events.Reason(reason), orig), m.Subject)
		require.NotEmpty(e.t, m.Header.Get(events.HeaderRejectDetail))
		require.NotEmpty(e.t, m.Header.Get(events.HeaderOriginalSubject))
		out[orig] = append(out[orig], reason)
	}
	return out
}

// model is the in-memory reference: a direct, naive computation of the
// ledger from the messages in stream order, written independently of the
// projection's code.
type model struct {
	requests map[string]RequestView
	sessions map[string]SessionView
	rejected map[uint64][]string
	// rollups are keyed by modelCellKey, not by the projection's key.
	rollups map[string]Rollup
}

// modelCellKey names a cell for the model: its hour, provider, model
// and labels, written out.
func modelCellKey(c Cell) string {
	return fmt.Sprintf("%d|%s|%q|%q|%v", c.Grain, c.Hour.UTC().Format(time.RFC3339), c.Provider, c.Model, c.Labels)
}

// sameLabels is the model's label comparison: nil and empty alike.
func sameLabels(a, b api.Labels) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func buildModel(ws []wire) model { return buildModelPriced(ws, pricing.Default()) }

// buildModelPriced is buildModel with every attempt priced in cat.
func buildModelPriced(ws []wire, cat *pricing.Catalog) model {
	type att struct {
		ev *events.Attempt
	}
	m := model{requests: map[string]RequestView{}, sessions: map[string]SessionView{}, rejected: map[uint64][]string{}, rollups: map[string]Rollup{}}
	owner := map[string]string{}
	first := map[string]*events.Attempt{} // the first accepted event in stream order
	perReq := map[string]map[int]*events.Attempt{}
	for i, w := range ws {
		seq := uint64(i + 1)
		ev, err := events.Decode(w.data)
		if err == nil {
			err = events.CheckSubject(w.subject, ev)
		}
		if err != nil {
			var re *events.RejectError
			if errors.As(err, &re) {
				m.rejected[seq] = []string{string(re.Reason)}
			}
			continue
		}
		if s, ok := owner[ev.RequestID]; ok && s != ev.SessionID {
			m.rejected[seq] = []string{string(events.ReasonSessionConflict)}
			continue
		}
		owner[ev.RequestID] = ev.SessionID
		if first[ev.RequestID] == nil {
			first[ev.RequestID] = ev
		}
		if perReq[ev.RequestID] == nil {
			perReq[ev.RequestID] = map[int]*events.Attempt{}
		}
		if cur, ok := perReq[ev.RequestID][ev.Attempt]; !ok || ev.EventID < cur.EventID {
			perReq[ev.RequestID][ev.Attempt] = ev
		}
	}
	for id, atts := range perReq {
		f := first[id]
		v := RequestView{RequestID: id, SessionID: owner[id], WinningAttempt: -1, Attempts: len(atts), Labels: f.Labels,
			Cell: &RecordCell{Hour: time.Date(f.StartedAt.Year(), f.StartedAt.Month(), f.StartedAt.Day(), f.StartedAt.Hour(), 0, 0, 0, time.UTC),
				Provider: f.Provider, Model: f.Model}}
		if len(v.Labels) == 0 {
			v.Labels = nil
		}
		nums := make([]int, 0, len(atts))
		for n := range atts {
			nums = append(nums, n)
		}
		sort.Ints(nums)
		anyFinal := false
		for i, n := range nums {
			ev := atts[n]
			v.Billed = v.Billed.Add(ev.Usage)
			if !sameLabels(ev.Labels, f.Labels) {
				v.LabelConflicts++
			}
			cost, priced := modelPrice(cat, ev)
			unpriced := int64(0)
			if !priced {
				unpriced = ev.Usage.InputTokens + ev.Usage.OutputTokens
			}
			v.BilledCost += cost
			v.UnpricedBilledTokens += unpriced
			if ev.Outcome == events.OutcomeSuccess {
				v.WinningAttempt, v.Usage = n, ev.Usage
				v.UsageCost, v.UnpricedUsageTokens = cost, unpriced
			} else if ev.Final {
				anyFinal = true
			}
			if i == 0 || ev.StartedAt.Before(v.FirstStartedAt) {
				v.FirstStartedAt = ev.StartedAt
			}
			if i == 0 || ev.FinishedAt.After(v.LastFinishedAt) {
				v.LastFinishedAt = ev.FinishedAt
			}
		}
		pick := atts[nums[len(nums)-1]]
		if v.WinningAttempt >= 0 {
			pick = atts[v.WinningAttempt]
		}
		v.Provider, v.Model = pick.Provider, pick.Model
		switch {
		case v.WinningAttempt >= 0:
			v.Status = StatusSucceeded
		case anyFinal:
			v.Status = StatusFailed
		default:
			v.Status = StatusPending
		}
		m.requests[id] = v
		s := m.sessions[v.SessionID]
		s.SessionID = v.SessionID
		modelSum(&s.Totals, v)
		m.sessions[v.SessionID] = s
		// One cell per grain: the hour's; the day's (its UTC date); the
		// model-hour's (no labels).
		h := v.Cell.Hour.UTC()
		for _, cell := range []Cell{
			{Hour: v.Cell.Hour, Provider: v.Cell.Provider, Model: v.Cell.Model, Labels: v.Labels},
			{Grain: GrainDay, Hour: time.Date(h.Year(), h.Month(), h.Day(), 0, 0, 0, 0, time.UTC), Provider: v.Cell.Provider, Model: v.Cell.Model, Labels: v.Labels},
			{Grain: GrainModelHour, Hour: v.Cell.Hour, Provider: v.Cell.Provider, Model: v.Cell.Model},
		} {
			c := m.rollups[modelCellKey(cell)]
			c.Cell = cell
			modelSum(&c.Totals, v)
			m.rollups[modelCellKey(cell)] = c
		}
	}
	return m
}

// modelSum adds request v to the sums t, field by field.
func modelSum(t *Totals, v RequestView) {
	t.Requests++
	switch v.Status {
	case StatusSucceeded:
		t.Succeeded++
	case StatusFailed:
		t.Failed++
	default:
		t.Pending++
	}
	t.Attempts += int64(v.Attempts)
	t.Usage = t.Usage.Add(v.Usage)
	t.Billed = t.Billed.Add(v.Billed)
	t.UsageCost += v.UsageCost
	t.BilledCost += v.BilledCost
	t.UnpricedUsageTokens += v.UnpricedUsageTokens
	t.UnpricedBilledTokens += v.UnpricedBilledTokens
	t.LabelConflicts += v.LabelConflicts
}

// requireLedger asserts that the live ledger equals the model.
func (e *env) requireLedger(m model) {
	e.t.Helper()
	reqs, sess := e.ledger()
	require.Equal(e.t, m.requests, reqs, "requests differ from the model")
	require.Equal(e.t, m.sessions, sess, "sessions differ from the model")
	require.Equal(e.t, m.rollups, e.rollups(), "rollups differ from the model")
	require.Equal(e.t, m.rejected, e.rejections(), "rejections differ from the model")
}

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}
