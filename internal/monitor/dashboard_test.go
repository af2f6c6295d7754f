package monitor

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/ledgertest"
)

// dashboardFile is the Grafana dashboard shipped in the repository.
const dashboardFile = "../../docs/grafana/ledger-dashboard.json"

// served is what a registry serves: each series name (a histogram's
// _bucket, _sum and _count, a summary's _sum and _count) and the label
// names its samples carry.
type served map[string]map[string]bool

func servedBy(t *testing.T, m *Metrics) served {
	t.Helper()
	mfs, err := m.Registry.Gather()
	require.NoError(t, err)
	s := served{}
	add := func(name string, ls []*dto.LabelPair, extra ...string) {
		if s[name] == nil {
			s[name] = map[string]bool{}
		}
		for _, l := range ls {
			s[name][l.GetName()] = true
		}
		for _, l := range extra {
			s[name][l] = true
		}
	}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			name := mf.GetName()
			switch mf.GetType() {
			case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
				add(name+"_bucket", mt.GetLabel(), "le")
				add(name+"_sum", mt.GetLabel())
				add(name+"_count", mt.GetLabel())
			case dto.MetricType_SUMMARY:
				add(name, mt.GetLabel(), "quantile")
				add(name+"_sum", mt.GetLabel())
				add(name+"_count", mt.GetLabel())
			default:
				add(name, mt.GetLabel())
			}
		}
	}
	return s
}

// grafanaVars are Grafana's variables in a query: the interval ones
// become a duration, the dashboard's own (used inside a label matcher's
// quotes) a regular expression.
var (
	intervalVars = regexp.MustCompile(`\$\{?__(rate_interval|interval|range)\}?`)
	dashVars     = regexp.MustCompile(`\$\{?[A-Za-z_][A-Za-z0-9_]*(:[a-z]+)?\}?`)
	labelValues  = regexp.MustCompile(`^label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\)$`)
)

// check parses a dashboard query (PromQL with Grafana's variables, or a
// label_values(selector, label) variable query) and returns the metric
// names it selects, or why it is wrong: it does not parse, a selector
// names no metric, or names a metric or a label the registry does not
// serve.
func (s served) check(query string) ([]string, error) {
	q := intervalVars.ReplaceAllString(query, "5m")
	q = dashVars.ReplaceAllString(q, ".*")
	var label string
	if m := labelValues.FindStringSubmatch(q); m != nil {
		q, label = m[1], m[2]
	}
	expr, err := parser.ParseExpr(q)
	if err != nil {
		return nil, fmt.Errorf("%q does not parse: %w", query, err)
	}
	var names []string
	var bad error
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok || bad != nil {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
				name = m.Value
			}
		}
		ls, ok := s[name]
		switch {
		case name == "":
			bad = fmt.Errorf("%q: selector %s names no metric", query, vs)
		case !ok:
			bad = fmt.Errorf("%q: metric %s is not served", query, name)
		}
		for _, m := range vs.LabelMatchers {
			if bad == nil && m.Name != labels.MetricName && !ls[m.Name] {
				bad = fmt.Errorf("%q: %s has no label %s", query, name, m.Name)
			}
		}
		if bad == nil && label != "" && !ls[label] {
			bad = fmt.Errorf("%q: %s has no label %s", query, name, label)
		}
		names = append(names, name)
		return nil
	})
	return names, bad
}

// dashboardQueries returns every query of a Grafana dashboard: each
// target's expr in every panel (rows' panels included) and each template
// variable's query.
func dashboardQueries(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var d struct {
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []struct {
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	require.NoError(t, json.Unmarshal(data, &d))
	type panel struct {
		Panels  []panel `json:"panels"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	}
	var qs []string
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				qs = append(qs, tg.Expr)
			}
			walk(p.Panels)
		}
	}
	var ps []panel
	for _, raw := range d.Panels {
		var p panel
		require.NoError(t, json.Unmarshal(raw, &p))
		ps = append(ps, p)
	}
	walk(ps)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if json.Unmarshal(v.Query, &q) != nil {
			require.NoError(t, json.Unmarshal(v.Query, &q.Query), "a variable's query is a string or {query}")
		}
		qs = append(qs, q.Query)
	}
	return qs
}

// servingRegistry is the registry of an aggregator that has projected a
// stream with every kind of usage series in it: a retried success on a
// priced model, a fallback to an unpriced one, a failure for good, with a
// metric label.
func servingRegistry(t *testing.T) served {
	t.Helper()
	js := ledgertest.StartStream(t)
	publish(t, js,
		ev{n: 1, request: "r1", attempt: 0, model: priced, kind: events.KindRateLimit, in: 100},
		ev{n: 2, request: "r1", attempt: 1, model: priced, in: 100, out: 50, cacheRead: 20, reasoning: 10},
		ev{n: 3, request: "r2", attempt: 0, model: priced, kind: events.KindOverloaded, in: 40},
		ev{n: 4, request: "r2", attempt: 1, model: "claude-test", in: 40, out: 7},
		ev{n: 5, request: "r3", attempt: 0, model: priced, kind: events.KindServer, final: true},
	)
	m := newMetrics(t, UsageOptions{Labels: []string{"team"}})
	project(t, js, m, 1)
	return servedBy(t, m)
}

// Every query of the shipped Grafana dashboard parses as PromQL (the
// parser Prometheus runs) and names only metrics, and labels, that a real
// aggregator serves; and it shows what issue 20 asks for.
func TestDashboardQueriesNameServedMetrics(t *testing.T) {
	s := servingRegistry(t)
	// The check itself: it refuses what it must.
	for _, tc := range []struct{ query, err string }{
		{`sum(rate(ledger_tokens_total{kind="usage"}[$__rate_interval]))`, ""},
		{`histogram_quantile(0.99, sum by (le) (rate(ledger_aggregator_batch_seconds_bucket[5m])))`, ""},
		{`label_values(ledger_tokens_total, model)`, ""},
		{`rate(ledger_token_total[5m])`, "not served"},
		{`rate(ledger_aggregator_batch_seconds[5m])`, "not served"},
		{`ledger_tokens_total{session_id="s"}`, "has no label session_id"},
		{`label_values(ledger_tokens_total, request_id)`, "has no label request_id"},
		{`{kind="usage"}`, "names no metric"},
		{`rate(ledger_tokens_total)`, "does not parse"},
	} {
		_, err := s.check(tc.query)
		if tc.err == "" {
			require.NoError(t, err, tc.query)
		} else {
			require.ErrorContains(t, err, tc.err, tc.query)
		}
	}

	qs := dashboardQueries(t, dashboardFile)
	require.GreaterOrEqual(t, len(qs), 20, "the dashboard's queries were found")
	used := map[string]bool{}
	for _, q := range qs {
		names, err := s.check(q)
		require.NoError(t, err)
		require.NotEmpty(t, names, q)
		for _, n := range names {
			used[n] = true
		}
	}
	for _, want := range []string{"ledger_tokens_total", "ledger_cost_total", "ledger_requests_total", "ledger_attempts_total",
		"ledger_unpriced_tokens_total", "ledger_aggregator_lag_events", "ledger_aggregator_lease_held", "ledger_aggregator_batch_seconds_count"} {
		require.True(t, used[want], "the dashboard shows %s", want)
	}
}

// No served series is per session or per request: no label is named
// session_id or request_id, and no label value is a session or request
// ID of the projected stream.
func TestNoSessionOrRequestSeries(t *testing.T) {
	js := ledgertest.StartStream(t)
	w := ledgertest.Generate(rand.New(rand.NewPCG(3, 4)), ledgertest.Spec{Sessions: 4, Calls: 40})
	for i, msg := range w.Messages {
		msg.Event.Labels = api.Labels{"team": fmt.Sprintf("team-%d", i%3), "user": fmt.Sprintf("user-%d", i%150)}
	}
	ledgertest.Publish(t, js, w.Messages)
	m := newMetrics(t, UsageOptions{Labels: []string{"team", "user"}, MaxValues: 10})
	project(t, js, m, 7)
	ids := map[string]bool{}
	for _, msg := range w.Messages {
		ids[msg.Event.SessionID], ids[msg.Event.RequestID] = true, true
	}
	mfs, err := m.Registry.Gather()
	require.NoError(t, err)
	n := 0
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				require.NotContains(t, []string{"session_id", "request_id"}, l.GetName(), mf.GetName())
				require.False(t, ids[l.GetValue()], "%s{%s=%q} is a per-session or per-request series", mf.GetName(), l.GetName(), l.GetValue())
			}
			if strings.HasPrefix(mf.GetName(), "ledger_") {
				n++
			}
		}
	}
	require.Greater(t, n, 10, "the usage series were served")
	require.True(t, slices.ContainsFunc(mfs, func(mf *dto.MetricFamily) bool { return mf.GetName() == "ledger_tokens_total" }))
	require.Contains(t, samples(t, m.Registry, "ledger_requests_total"),
		`model="claude-test",outcome="succeeded",provider="anthropic",team="team-0",user="__overflow__"`, "the metric labels were served, user past its cap")
	require.Positive(t, samples(t, m.Registry, "ledger_metric_label_overflow_total")[`key="user"`])
}
