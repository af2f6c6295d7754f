package monitor

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/ledgertest"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/pricing"
	"github.com/agentledger/ledger/internal/projection"
)

// samples gathers reg and returns every sample of the metric name, keyed
// by its labels in the form `a="x",b="y"` (sorted by name); "" for none.
func samples(t *testing.T, reg prometheus.Gatherer, name string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			sort.Strings(ls)
			v := m.GetCounter().GetValue()
			if m.GetGauge() != nil {
				v = m.GetGauge().GetValue()
			}
			got[strings.Join(ls, ",")] = v
		}
	}
	return got
}

// norm returns want with its keys' labels sorted as samples sorts them.
func norm(want map[string]float64) map[string]float64 {
	out := make(map[string]float64, len(want))
	for k, v := range want {
		ls := strings.Split(k, ",")
		sort.Strings(ls)
		out[strings.Join(ls, ",")] = v
	}
	return out
}

func project(t *testing.T, js jetstream.JetStream, m *Metrics, batch int) {
	t.Helper()
	stop := ledgertest.RunAggregator(t, js, projection.Config{Observer: m, BatchSize: batch, InstanceID: testInstance, LeaseTTL: 5 * time.Second})
	ledgertest.WaitCaughtUp(t, js)
	stop()
}

// projectOneBatch feeds m the changes of one batch holding every event of
// stream, deterministically: the aggregator writes the records (in
// whatever batches the stream's delivery makes), and m is told of each,
// absent before, as one batch (in key order, which is the stream's in
// the tables) with the stream's failed events of its request.
func projectOneBatch(t *testing.T, js jetstream.JetStream, m *Metrics, stream []ev) {
	t.Helper()
	project(t, js, newMetrics(t, UsageOptions{}), 1000)
	var cs []projection.Change
	err := projection.ReadAll(t.Context(), js, names.RequestsBucket, func(key string, value []byte) error {
		r := new(projection.Request)
		if err := r.UnmarshalJSON(value); err != nil {
			return err
		}
		var failed []*events.Attempt
		for _, e := range stream {
			if e.request == key && e.kind != "" {
				failed = append(failed, e.event())
			}
		}
		cs = append(cs, projection.NewChange(nil, r, failed...))
		return nil
	})
	require.NoError(t, err)
	m.RequestsCommitted(projection.NewChanges(cs...))
}

const testInstance = "monitor-test"

func newMetrics(t *testing.T, o UsageOptions) *Metrics {
	t.Helper()
	m, err := NewMetrics(&fakeSource{}, o)
	require.NoError(t, err)
	return m
}

// ev is a compact attempt event for the tables.
type ev struct {
	n         int // event ID ordinal: a smaller one wins an attempt number
	request   string
	attempt   int
	model     string
	kind      events.ErrorKind // "": success
	final     bool
	in, out   int64
	cacheRead int64
	reasoning int64
	labels    api.Labels
}

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func (e ev) event() *events.Attempt {
	a := &events.Attempt{Schema: events.SchemaV1, EventID: fmt.Sprintf("01JD%022d", e.n), RequestID: e.request,
		SessionID: "sess-1", Attempt: e.attempt, Outcome: events.OutcomeSuccess, Final: true,
		Provider: "anthropic", Model: e.model,
		Usage:     events.Usage{InputTokens: e.in, OutputTokens: e.out, CacheReadInputTokens: e.cacheRead, ReasoningTokens: e.reasoning},
		StartedAt: t0.Add(time.Duration(e.n) * time.Second), FinishedAt: t0.Add(time.Duration(e.n)*time.Second + time.Second),
		Labels: e.labels}
	if e.kind != "" {
		a.Outcome, a.Final = events.OutcomeError, e.final
		a.Error = &events.AttemptError{Kind: e.kind, Retryable: !e.final, Message: "failed"}
	}
	return a
}

func publish(t *testing.T, js jetstream.JetStream, evs ...ev) {
	t.Helper()
	msgs := make([]ledgertest.Message, len(evs))
	for i, e := range evs {
		msgs[i] = ledgertest.Message{Event: e.event(), NoMsgID: true}
	}
	ledgertest.Publish(t, js, msgs)
}

// priced is a model the default catalog prices; cost is what it charges
// for an attempt (by the catalog, not by the projection's code).
const priced = "claude-opus-4-5-20251101"

func cost(t *testing.T, e ev) float64 {
	t.Helper()
	a := e.event()
	c, ok := pricing.Default().Price(pricing.Attempt{Provider: a.Provider, Model: a.Model, At: a.StartedAt, Usage: a.Usage})
	require.True(t, ok, "the default catalog prices %s", a.Model)
	return float64(c.Total) / 1e9
}

// The usage series after projecting a known stream: tokens by kind and
// type, money, requests by the status they enter and attempts by outcome,
// each under the provider and model the contract gives them. Batch size 1
// commits every event alone; a large batch commits the stream at once, so
// that a request's intermediate status is never committed.
func TestUsageSeries(t *testing.T) {
	const unpriced = "claude-test"
	retry := []ev{ // a rate-limited attempt billed its input, then a success
		{n: 1, request: "r1", attempt: 0, model: priced, kind: events.KindRateLimit, in: 100},
		{n: 2, request: "r1", attempt: 1, model: priced, in: 100, out: 50, cacheRead: 20, reasoning: 10},
	}
	fallback := []ev{ // overloaded on the priced model, a success on the unpriced one
		{n: 3, request: "r2", attempt: 0, model: priced, kind: events.KindOverloaded, in: 40},
		{n: 4, request: "r2", attempt: 1, model: unpriced, in: 40, out: 7},
	}
	failed := []ev{{n: 5, request: "r3", attempt: 0, model: priced, kind: events.KindServer, final: true}}
	p := `model="` + priced + `",provider="anthropic"`
	u := `model="` + unpriced + `",provider="anthropic"`
	for _, tc := range []struct {
		name   string
		stream []ev
		batch  int // 0: one batch (projectOneBatch)
		want   map[string]map[string]float64
	}{
		{"a retried request, one event per batch", retry, 1, map[string]map[string]float64{
			"ledger_tokens_total": {
				`kind="usage",` + p + `,type="input"`: 100, `kind="usage",` + p + `,type="output"`: 50,
				`kind="usage",` + p + `,type="cache_read"`: 20, `kind="usage",` + p + `,type="reasoning"`: 10,
				`kind="billed",` + p + `,type="input"`: 200, `kind="billed",` + p + `,type="output"`: 50,
				`kind="billed",` + p + `,type="cache_read"`: 20, `kind="billed",` + p + `,type="reasoning"`: 10,
			},
			"ledger_cost_total":     {`kind="usage",` + p: cost(t, retry[1]), `kind="billed",` + p: cost(t, retry[0]) + cost(t, retry[1])},
			"ledger_requests_total": {p + `,outcome="pending"`: 1, p + `,outcome="succeeded"`: 1},
			"ledger_attempts_total": {p + `,outcome="rate_limit"`: 1, p + `,outcome="success"`: 1},
		}},
		{"a retried request in one batch: never seen pending", retry, 0, map[string]map[string]float64{
			"ledger_requests_total": {p + `,outcome="succeeded"`: 1},
			"ledger_attempts_total": {p + `,outcome="rate_limit"`: 1, p + `,outcome="success"`: 1},
		}},
		{"a fallback: billed per attempt's model, usage and the request under the winner's", fallback, 1, map[string]map[string]float64{
			"ledger_tokens_total": {
				`kind="billed",` + p + `,type="input"`: 40,
				`kind="usage",` + u + `,type="input"`:  40, `kind="usage",` + u + `,type="output"`: 7,
				`kind="billed",` + u + `,type="input"`: 40, `kind="billed",` + u + `,type="output"`: 7,
			},
			"ledger_cost_total":            {`kind="billed",` + p: cost(t, fallback[0])},
			"ledger_unpriced_tokens_total": {`kind="usage",` + u: 47, `kind="billed",` + u: 47},
			"ledger_requests_total":        {p + `,outcome="pending"`: 1, u + `,outcome="succeeded"`: 1},
			"ledger_attempts_total":        {p + `,outcome="overloaded"`: 1, u + `,outcome="success"`: 1},
		}},
		{"a request that fails for good", failed, 1, map[string]map[string]float64{
			"ledger_tokens_total":   {},
			"ledger_requests_total": {p + `,outcome="failed"`: 1},
			"ledger_attempts_total": {p + `,outcome="server"`: 1},
		}},
		{"every event twice: counted once", append(slices.Clone(retry), retry...), 1, map[string]map[string]float64{
			"ledger_tokens_total": {
				`kind="usage",` + p + `,type="input"`: 100, `kind="usage",` + p + `,type="output"`: 50,
				`kind="usage",` + p + `,type="cache_read"`: 20, `kind="usage",` + p + `,type="reasoning"`: 10,
				`kind="billed",` + p + `,type="input"`: 200, `kind="billed",` + p + `,type="output"`: 50,
				`kind="billed",` + p + `,type="cache_read"`: 20, `kind="billed",` + p + `,type="reasoning"`: 10,
			},
			"ledger_requests_total": {p + `,outcome="pending"`: 1, p + `,outcome="succeeded"`: 1},
			"ledger_attempts_total": {p + `,outcome="rate_limit"`: 1, p + `,outcome="success"`: 1},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js := ledgertest.StartStream(t)
			publish(t, js, tc.stream...)
			m := newMetrics(t, UsageOptions{})
			if tc.batch == 0 {
				projectOneBatch(t, js, m, tc.stream)
			} else {
				project(t, js, m, tc.batch)
			}
			for name, want := range tc.want {
				require.Equal(t, norm(want), samples(t, m.Registry, name), name)
			}
			require.Equal(t, map[string]float64{
				`metric="ledger_tokens_total"`: 0, `metric="ledger_cost_total"`: 0, `metric="ledger_unpriced_tokens_total"`: 0,
				`metric="ledger_requests_total"`: 0, `metric="ledger_attempts_total"`: 0,
			}, samples(t, m.Registry, "ledger_metric_decreases_skipped_total"))
		})
	}
}

// An event that replaces a recorded one (the same attempt number, a
// smaller event_id) with less usage or another outcome does not make a
// counter go down: the decrease is skipped and counted. Committed in the
// same batch as the event it replaces, it is simply what was recorded.
func TestDecreasesSkipped(t *testing.T) {
	p := `model="` + priced + `",provider="anthropic"`
	stream := []ev{
		{n: 9, request: "r1", attempt: 0, model: priced, in: 100, out: 10},
		{n: 8, request: "r1", attempt: 0, model: priced, kind: events.KindTimeout, final: true, in: 80},
	}
	for _, tc := range []struct {
		name        string
		batch       int // 0: one batch (projectOneBatch)
		tokens      map[string]float64
		requests    map[string]float64
		attempts    map[string]float64
		skipped     map[string]float64
		costWinning bool
	}{
		{"in two batches", 1,
			map[string]float64{`kind="usage",` + p + `,type="input"`: 100, `kind="usage",` + p + `,type="output"`: 10,
				`kind="billed",` + p + `,type="input"`: 100, `kind="billed",` + p + `,type="output"`: 10},
			map[string]float64{p + `,outcome="succeeded"`: 1, p + `,outcome="failed"`: 1},
			map[string]float64{p + `,outcome="success"`: 1},
			// usage: its winning attempt is gone; billed: 100 -> 80 in, 10 -> 0 out;
			// the request left succeeded; the attempt changed outcome.
			map[string]float64{`metric="ledger_tokens_total"`: 2, `metric="ledger_cost_total"`: 2, `metric="ledger_unpriced_tokens_total"`: 0,
				`metric="ledger_requests_total"`: 1, `metric="ledger_attempts_total"`: 1},
			true},
		{"in one batch", 0,
			map[string]float64{`kind="billed",` + p + `,type="input"`: 80},
			map[string]float64{p + `,outcome="failed"`: 1},
			map[string]float64{p + `,outcome="timeout"`: 1},
			map[string]float64{`metric="ledger_tokens_total"`: 0, `metric="ledger_cost_total"`: 0, `metric="ledger_unpriced_tokens_total"`: 0,
				`metric="ledger_requests_total"`: 0, `metric="ledger_attempts_total"`: 0},
			false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js := ledgertest.StartStream(t)
			publish(t, js, stream...)
			m := newMetrics(t, UsageOptions{})
			if tc.batch == 0 {
				projectOneBatch(t, js, m, stream)
			} else {
				project(t, js, m, tc.batch)
			}
			require.Equal(t, norm(tc.tokens), samples(t, m.Registry, "ledger_tokens_total"))
			require.Equal(t, norm(tc.requests), samples(t, m.Registry, "ledger_requests_total"))
			require.Equal(t, norm(tc.attempts), samples(t, m.Registry, "ledger_attempts_total"))
			require.Equal(t, tc.skipped, samples(t, m.Registry, "ledger_metric_decreases_skipped_total"))
			billed := cost(t, stream[1])
			want := map[string]float64{`kind="billed",` + p: billed}
			if tc.costWinning {
				want = map[string]float64{`kind="usage",` + p: cost(t, stream[0]), `kind="billed",` + p: cost(t, stream[0])}
			}
			require.Equal(t, norm(want), samples(t, m.Registry, "ledger_cost_total"))
		})
	}
}

// workloadTruth is what the usage series of a whole ledgertest workload
// are when each event is counted exactly once (all its calls are on one
// unpriced model; failed attempts time out); requests only by final
// status (how many are seen pending depends on the batches).
func workloadTruth(w *ledgertest.Workload) map[string]map[string]float64 {
	const s = `model="claude-test",provider="anthropic"`
	tok := map[string]float64{}
	req := map[string]float64{}
	att := map[string]float64{}
	unp := map[string]float64{}
	for _, r := range w.Requests {
		for kind, u := range map[string]events.Usage{"usage": r.Usage, "billed": r.Billed} {
			for i, v := range typed(u) {
				if v > 0 {
					tok[`kind="`+kind+`",`+s+`,type="`+typeNames[i]+`"`] += float64(v)
				}
			}
		}
		if r.UnpricedUsageTokens > 0 {
			unp[`kind="usage",`+s] += float64(r.UnpricedUsageTokens)
		}
		if r.UnpricedBilledTokens > 0 {
			unp[`kind="billed",`+s] += float64(r.UnpricedBilledTokens)
		}
		if r.Status != projection.StatusPending {
			req[s+`,outcome="`+r.Status+`"`]++
		}
		failures := r.Attempts
		if r.Status == projection.StatusSucceeded {
			att[s+`,outcome="success"`]++
			failures--
		}
		if failures > 0 {
			att[s+`,outcome="timeout"`] += float64(failures)
		}
	}
	return map[string]map[string]float64{"ledger_tokens_total": tok, "ledger_requests_total": req,
		"ledger_attempts_total": att, "ledger_unpriced_tokens_total": unp}
}

// A crash of the aggregator (its Run stopped at a write point of a
// batch) and a new term in the same process, reporting to the same
// metrics, never count an event twice, although the new term is handed
// again the events of the batch that failed and the workload publishes
// one message in ten twice without dedup. A batch that failed before its
// writes is applied again and counted then: exactly the truth. One whose
// writes reached the buckets but not its checkpoint is found there by the
// next term, and counted by nobody: never more than the truth.
func TestCrashDoesNotCountTwice(t *testing.T) {
	for _, tc := range []struct {
		point projection.FaultPoint
		exact bool
	}{
		{"", true},
		{projection.FaultBeforeWrites, true},
		{projection.FaultAfterCheckpoint, true},
		{projection.FaultBetweenBuckets, false},
		{projection.FaultBeforeCheckpoint, false},
	} {
		t.Run(string(tc.point), func(t *testing.T) {
			js := ledgertest.StartStream(t)
			w := ledgertest.Generate(rand.New(rand.NewPCG(7, 9)), ledgertest.Spec{Sessions: 5, Calls: 120})
			ledgertest.Publish(t, js, w.Messages)
			m := newMetrics(t, UsageOptions{})
			if tc.point != "" {
				var hits atomic.Int32
				agg, err := projection.New(projection.Config{JS: js, Observer: m, BatchSize: 13, InstanceID: testInstance, LeaseTTL: 5 * time.Second,
					Faults: func(p projection.FaultPoint) error {
						if p == tc.point && hits.Add(1) == 3 {
							return errors.New("injected crash")
						}
						return nil
					}})
				require.NoError(t, err)
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				require.ErrorContains(t, agg.Run(ctx), "injected crash")
			}
			project(t, js, m, 13)
			truth := workloadTruth(w)
			for name, want := range truth {
				want = norm(want)
				got := samples(t, m.Registry, name)
				if name == "ledger_requests_total" {
					delete(got, `model="claude-test",outcome="pending",provider="anthropic"`)
				}
				if tc.exact {
					require.Equal(t, want, got, name)
					continue
				}
				require.NotEmpty(t, got, name)
				for k, v := range got {
					require.LessOrEqual(t, v, want[k], "%s{%s}", name, k)
				}
			}
		})
	}
}

// Metric labels: the request's labels (its first accepted event's, a
// later event's other labels ignored) become labels of the usage series;
// past --metric-label-values distinct values a key's requests are counted
// under __overflow__, each change so counted adding one to
// ledger_metric_label_overflow_total{key}; a request without the label
// has none ("").
func TestMetricLabels(t *testing.T) {
	team := func(v string) api.Labels { return api.Labels{"team": v, "user": "u-" + v} }
	stream := []ev{
		{n: 1, request: "r1", attempt: 0, model: priced, kind: events.KindTimeout, in: 10, labels: team("a")},
		{n: 2, request: "r1", attempt: 1, model: priced, in: 10, out: 1, labels: team("z")}, // r1 stays team a
		{n: 3, request: "r2", attempt: 0, model: priced, in: 20, out: 2, labels: team("b")},
		{n: 4, request: "r3", attempt: 0, model: priced, in: 30, out: 3, labels: team("c")},
		{n: 5, request: "r4", attempt: 0, model: priced, kind: events.KindTimeout, in: 40, labels: team("d")},
		{n: 6, request: "r4", attempt: 1, model: priced, in: 40, out: 4, labels: team("d")},
		{n: 7, request: "r5", attempt: 0, model: priced, in: 50, out: 5},
	}
	p := `model="` + priced + `",provider="anthropic"`
	for _, tc := range []struct {
		name     string
		keys     []string
		batch    int // 0: one batch (projectOneBatch)
		input    map[string]float64
		overflow map[string]float64
	}{
		{"team, one event per batch", []string{"team"}, 1,
			map[string]float64{
				p + `,team="a"`: 10, p + `,team="b"`: 20, p + `,team="__overflow__"`: 70, p + `,team=""`: 50,
			},
			// r3 once, r4 in two batches
			map[string]float64{`key="team"`: 3}},
		{"team, one batch", []string{"team"}, 0,
			map[string]float64{
				p + `,team="a"`: 10, p + `,team="b"`: 20, p + `,team="__overflow__"`: 70, p + `,team=""`: 50,
			},
			map[string]float64{`key="team"`: 2}},
		{"team and user", []string{"team", "user"}, 0,
			map[string]float64{
				p + `,team="a",user="u-a"`: 10, p + `,team="b",user="u-b"`: 20,
				p + `,team="__overflow__",user="__overflow__"`: 70, p + `,team="",user=""`: 50,
			},
			map[string]float64{`key="team"`: 2, `key="user"`: 2}},
		{"no labels", nil, 0,
			map[string]float64{p: 150},
			map[string]float64{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js := ledgertest.StartStream(t)
			publish(t, js, stream...)
			m := newMetrics(t, UsageOptions{Labels: tc.keys, MaxValues: 2})
			if tc.batch == 0 {
				projectOneBatch(t, js, m, stream)
			} else {
				project(t, js, m, tc.batch)
			}
			input := map[string]float64{}
			for k, v := range samples(t, m.Registry, "ledger_tokens_total") {
				if strings.Contains(k, `kind="usage"`) && strings.Contains(k, `type="input"`) {
					ls := strings.Split(k, ",")
					ls = slices.DeleteFunc(ls, func(l string) bool { return strings.HasPrefix(l, "kind=") || strings.HasPrefix(l, "type=") })
					input[strings.Join(ls, ",")] = v
				}
			}
			require.Equal(t, norm(tc.input), input)
			require.Equal(t, tc.overflow, samples(t, m.Registry, "ledger_metric_label_overflow_total"))
		})
	}
}
