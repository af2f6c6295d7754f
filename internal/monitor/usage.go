package monitor

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/projection"
)

// Limits and defaults of the metric labels (UsageOptions).
const (
	// MaxMetricLabels is the most label keys UsageOptions.Labels names:
	// each multiplies the number of series.
	MaxMetricLabels = 4
	// DefaultMetricLabelValues is UsageOptions.MaxValues's default.
	DefaultMetricLabelValues = 100
	// MaxMetricLabelValues bounds UsageOptions.MaxValues.
	MaxMetricLabelValues = 10_000
	// OverflowValue is the value of a metric label past its cap.
	OverflowValue = "__overflow__"
)

// UsageOptions choose the request labels that become labels of the usage
// series (`aggregator run --metric-labels` and `--metric-label-values`).
type UsageOptions struct {
	// Labels are request label keys (api.Labels) that become labels of
	// every usage series, in this order; at most MaxMetricLabels.
	Labels []string
	// MaxValues is the most distinct values this process gives each of
	// Labels, first come first served; the requests of any other value
	// are counted under OverflowValue. 0 is DefaultMetricLabelValues.
	MaxValues int
}

// OptionError is an invalid UsageOptions field: Option names the flag,
// Value is the value refused and Rule the rule it breaks.
type OptionError struct {
	Option, Value, Rule string
}

func (e *OptionError) Error() string {
	return fmt.Sprintf("--%s: %q: %s", e.Option, e.Value, e.Rule)
}

// reservedLabels are label names a metric label key may not take: the
// usage series' own, the helper series', Prometheus' and its targets',
// and the IDs no series may ever carry.
var reservedLabels = []string{"provider", "model", "kind", "type", "outcome", "key", "metric", "reason",
	"le", "quantile", "job", "instance", "session_id", "request_id", "event_id"}

// Validate checks the options: each key follows the label key grammar of
// api.Labels, is not reserved and not named twice; MaxValues is 0 to
// MaxMetricLabelValues.
func (o UsageOptions) Validate() error {
	if len(o.Labels) > MaxMetricLabels {
		return &OptionError{"metric-labels", strings.Join(o.Labels, ","), fmt.Sprintf("at most %d keys, got %d", MaxMetricLabels, len(o.Labels))}
	}
	for i, k := range o.Labels {
		if err := (api.Labels{k: "v"}).Validate(); err != nil {
			var rule string
			if le, ok := err.(*api.LabelError); ok {
				rule = le.Rule
			}
			return &OptionError{"metric-labels", k, "not a label key: " + rule}
		}
		if slices.Contains(reservedLabels, k) {
			return &OptionError{"metric-labels", k, "reserved: the series have a label of that name, or it would be a per-request or per-session series"}
		}
		if slices.Contains(o.Labels[:i], k) {
			return &OptionError{"metric-labels", k, "named twice"}
		}
	}
	if o.MaxValues < 0 || o.MaxValues > MaxMetricLabelValues {
		return &OptionError{"metric-label-values", fmt.Sprint(o.MaxValues), fmt.Sprintf("must be 1 to %d (0: the default, %d)", MaxMetricLabelValues, DefaultMetricLabelValues)}
	}
	return nil
}

// ParseMetricLabels splits a --metric-labels value ("team,user") into
// keys; "" is none.
func ParseMetricLabels(s string) []string {
	var keys []string
	for k := range strings.SplitSeq(s, ",") {
		if k = strings.TrimSpace(k); k != "" {
			keys = append(keys, k)
		}
	}
	return keys
}

// The two kinds of token and money series.
const (
	kindUsage = iota
	kindBilled
	numKinds
)

var kindNames = [numKinds]string{"usage", "billed"}

// The token types: cache_read and cache_creation are parts of input,
// reasoning of output (api.Usage).
const numTypes = 5

var typeNames = [numTypes]string{"input", "output", "cache_read", "cache_creation", "reasoning"}

func typed(u events.Usage) [numTypes]int64 {
	return [numTypes]int64{u.InputTokens, u.OutputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens, u.ReasoningTokens}
}

// Request outcomes: the status a request enters.
var statusNames = []string{projection.StatusSucceeded, projection.StatusFailed, projection.StatusPending}

// Attempt outcomes: success, an error kind, or error when the kind is not
// known.
var outcomeNames = []string{"success",
	string(events.KindRateLimit), string(events.KindOverloaded), string(events.KindTimeout), string(events.KindConnection),
	string(events.KindServer), string(events.KindClient), string(events.KindAuth), string(events.KindQuota),
	string(events.KindCanceled), string(events.KindCircuitOpen), string(events.KindOther), "error"}

const outcomeUnknownError = 12

// The metrics a decrease can be skipped in (ledger_metric_decreases_skipped_total).
const (
	skipTokens = iota
	skipCost
	skipUnpriced
	skipRequests
	skipAttempts
	numSkips
)

var skipNames = [numSkips]string{"ledger_tokens_total", "ledger_cost_total", "ledger_unpriced_tokens_total",
	"ledger_requests_total", "ledger_attempts_total"}

// seriesKey names the usage series of one provider, model and set of
// metric label values.
type seriesKey struct {
	provider, model string
	labels          [MaxMetricLabels]string
}

// series are the counters of one seriesKey. Money is in nano-USD
// (pricing.Money), exact until scraped.
type series struct {
	tokens   [numKinds][numTypes]uint64
	cost     [numKinds]uint64
	unpriced [numKinds]uint64
	requests [3]uint64
	attempts [13]uint64
}

// usage are the usage series, fed by the changes of committed batches
// (projection.ChangeObserver) and read when scraped. Nothing here is a
// per-session or per-request series: the keys are provider, model and the
// capped metric labels.
type usage struct {
	keys      []string
	maxValues int

	descTokens, descCost, descUnpriced, descRequests, descAttempts, descOverflow, descSkipped *prometheus.Desc

	mu sync.Mutex
	// admitted are the values each metric label has been given.
	admitted []map[string]struct{}
	series   map[seriesKey]*series
	overflow [MaxMetricLabels]uint64
	skipped  [numSkips]uint64
	// last is the last series looked up, which the next lookup of one
	// request usually wants again.
	lastKey seriesKey
	last    *series
}

func newUsage(o UsageOptions) *usage {
	u := &usage{keys: slices.Clone(o.Labels), maxValues: o.MaxValues, series: make(map[seriesKey]*series)}
	if u.maxValues == 0 {
		u.maxValues = DefaultMetricLabelValues
	}
	for range u.keys {
		u.admitted = append(u.admitted, make(map[string]struct{}))
	}
	own := func(names ...string) []string { return append(names, u.keys...) }
	for _, d := range []struct {
		desc   **prometheus.Desc
		name   string
		labels []string
		help   string
	}{
		{&u.descTokens, "ledger_tokens_total", own("provider", "model", "kind", "type"),
			"Tokens this process added to the ledger: kind=usage (each request's winning attempt, under its provider and model) or billed (every attempt, under its own); " +
				"type=input, output, cache_read, cache_creation (parts of input) or reasoning (part of output): add input and output only."},
		{&u.descCost, "ledger_cost_total", own("provider", "model", "kind"),
			"US dollars this process added to the ledger, each attempt at its own price: kind=usage (winning attempts) or billed (every attempt). " +
				"A correction downward (an event replacing another) is not subtracted: see ledger_metric_decreases_skipped_total."},
		{&u.descUnpriced, "ledger_unpriced_tokens_total", own("provider", "model", "kind"),
			"Input and output tokens this process added to the ledger on models without a price in the ledger's catalog (kind=usage or billed): the money leaves them out."},
		{&u.descRequests, "ledger_requests_total", own("provider", "model", "outcome"),
			"Requests entering a status in batches this process committed: outcome=pending when first recorded without a final attempt, " +
				"succeeded or failed when reaching that status; under the request's provider and model then (the winning attempt's, else the latest attempt's)."},
		{&u.descAttempts, "ledger_attempts_total", own("provider", "model", "outcome"),
			"Attempts this process added to the ledger, each once, under its own provider and model: outcome=success or the error kind."},
		{&u.descOverflow, "ledger_metric_label_overflow_total", []string{"key"},
			"Request changes counted under " + OverflowValue + " for a metric label (--metric-labels) whose distinct values passed the cap (--metric-label-values)."},
		{&u.descSkipped, "ledger_metric_decreases_skipped_total", []string{"metric"},
			"Decreases a counter did not take: a batch changed a request so that a series would go down (an event replacing another with a smaller event_id, " +
				"a request leaving a final status); once per series and request change."},
	} {
		*d.desc = prometheus.NewDesc(d.name, d.help, d.labels, nil)
	}
	return u
}

func (u *usage) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{u.descTokens, u.descCost, u.descUnpriced, u.descRequests, u.descAttempts, u.descOverflow, u.descSkipped} {
		ch <- d
	}
}

func (u *usage) Collect(ch chan<- prometheus.Metric) {
	u.mu.Lock()
	defer u.mu.Unlock()
	emit := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, lv...)
	}
	for k, s := range u.series {
		with := func(own ...string) []string {
			return append(append([]string{k.provider, k.model}, own...), k.labels[:len(u.keys)]...)
		}
		for kind, name := range kindNames {
			for t, tn := range typeNames {
				if v := s.tokens[kind][t]; v > 0 {
					emit(u.descTokens, float64(v), with(name, tn)...)
				}
			}
			if v := s.cost[kind]; v > 0 {
				emit(u.descCost, float64(v)/1e9, with(name)...)
			}
			if v := s.unpriced[kind]; v > 0 {
				emit(u.descUnpriced, float64(v), with(name)...)
			}
		}
		for i, v := range s.requests {
			if v > 0 {
				emit(u.descRequests, float64(v), with(statusNames[i])...)
			}
		}
		for i, v := range s.attempts {
			if v > 0 {
				emit(u.descAttempts, float64(v), with(outcomeNames[i])...)
			}
		}
	}
	for i, k := range u.keys {
		emit(u.descOverflow, float64(u.overflow[i]), k)
	}
	for i, n := range skipNames {
		emit(u.descSkipped, float64(u.skipped[i]), n)
	}
}

// RequestsCommitted adds what each request record of a committed batch
// gained.
func (u *usage) RequestsCommitted(c projection.Changes) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for i := range c.Len() {
		u.apply(c.At(i))
	}
}

// apply adds what one request record gained in a batch: the attempts it
// did not have, the tokens and money of the attempts that are new or
// replaced and of its winning attempt if that changed, and the status it
// entered. A series that would go down is left as it is and the decrease
// counted (ledger_metric_decreases_skipped_total).
func (u *usage) apply(c projection.Change) {
	was, now := c.Was(), c.Now()
	lv := lazyLabels{u: u, r: now}
	var old []projection.Entry
	if was != nil {
		old = was.Log
	}
	i := 0
	for n := range now.Log {
		e := &now.Log[n]
		for i < len(old) && old[i].Attempt < e.Attempt {
			i++
		}
		var o *projection.Entry
		if i < len(old) && old[i].Attempt == e.Attempt {
			o = &old[i]
		}
		if sameEntry(o, e) {
			continue
		}
		switch {
		case o == nil:
			u.at(e.Provider, e.Model, lv.get()).attempts[outcomeOf(c, e)]++
		case o.Outcome != e.Outcome || o.Provider != e.Provider || o.Model != e.Model:
			u.skipped[skipAttempts]++ // the attempt stays counted as first recorded
		}
		u.move(kindBilled, &lv, o, e)
	}
	if wo, wn := winner(was), winner(now); !sameEntry(wo, wn) {
		u.move(kindUsage, &lv, wo, wn)
	}
	ws := ""
	if was != nil && was.Exists() {
		ws = was.Status
	}
	if now.Status != ws {
		if i := slices.Index(statusNames, now.Status); i >= 0 && (ws == "" || now.Status != projection.StatusPending) {
			u.at(now.Provider, now.Model, lv.get()).requests[i]++
		}
		if ws == projection.StatusSucceeded || ws == projection.StatusFailed {
			u.skipped[skipRequests]++
		}
	}
}

// move records that one attempt's contribution of kind went from o to e
// (either nil): under e's series, the difference when o is in the same
// series, else e whole; o's leaving another series is a skipped decrease.
func (u *usage) move(kind int, lv *lazyLabels, o, e *projection.Entry) {
	if e != nil {
		s := u.at(e.Provider, e.Model, lv.get())
		var base projection.Entry
		if o != nil && o.Provider == e.Provider && o.Model == e.Model {
			base, o = *o, nil
		}
		now, was := typed(e.Usage), typed(base.Usage)
		down := false
		for t := range numTypes {
			down = add(&s.tokens[kind][t], now[t]-was[t]) || down
		}
		if add(&s.cost[kind], costOf(e)-costOf(&base)) {
			u.skipped[skipCost]++
		}
		if add(&s.unpriced[kind], unpricedOf(e)-unpricedOf(&base)) {
			u.skipped[skipUnpriced]++
		}
		if down {
			u.skipped[skipTokens]++
		}
	}
	if o == nil {
		return
	}
	if typed(o.Usage) != ([numTypes]int64{}) {
		u.skipped[skipTokens]++
	}
	if costOf(o) > 0 {
		u.skipped[skipCost]++
	}
	if unpricedOf(o) > 0 {
		u.skipped[skipUnpriced]++
	}
}

// add adds d to *c when it is positive, and reports whether it is
// negative (a decrease not taken).
func add(c *uint64, d int64) bool {
	if d > 0 {
		*c += uint64(d)
	}
	return d < 0
}

func costOf(e *projection.Entry) int64 {
	if e.Unpriced {
		return 0
	}
	return int64(e.Cost)
}

// unpricedOf is what an unpriced attempt counts: its input and output
// tokens (as the records' unpriced fields).
func unpricedOf(e *projection.Entry) int64 {
	if !e.Unpriced {
		return 0
	}
	return e.Usage.InputTokens + e.Usage.OutputTokens
}

// sameEntry reports whether a and b (either nil) are the same accepted
// event.
func sameEntry(a, b *projection.Entry) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Attempt == b.Attempt && a.EventID == b.EventID && a.Outcome == b.Outcome && a.Provider == b.Provider &&
		a.Model == b.Model && a.Usage == b.Usage && a.Cost == b.Cost && a.Unpriced == b.Unpriced
}

// winner returns r's winning attempt's entry; nil when none.
func winner(r *projection.Request) *projection.Entry {
	if r == nil || r.WinningAttempt < 0 {
		return nil
	}
	for i := range r.Log {
		if r.Log[i].Attempt == r.WinningAttempt {
			return &r.Log[i]
		}
	}
	return nil
}

// outcomeOf is the index in outcomeNames of a new entry's outcome.
func outcomeOf(c projection.Change, e *projection.Entry) int {
	if e.Outcome == events.OutcomeSuccess {
		return 0
	}
	if i := slices.Index(outcomeNames[1:outcomeUnknownError], string(c.ErrorKind(e))); i >= 0 {
		return i + 1
	}
	return outcomeUnknownError
}

// at returns the series of a provider, model and label values, making it
// when it is new.
func (u *usage) at(provider, model string, lv *[MaxMetricLabels]string) *series {
	k := seriesKey{provider: provider, model: model, labels: *lv}
	if u.last != nil && k == u.lastKey {
		return u.last
	}
	s, ok := u.series[k]
	if !ok {
		s = &series{}
		k.provider, k.model = strings.Clone(provider), strings.Clone(model)
		u.series[k] = s
	}
	u.lastKey, u.last = k, s
	return s
}

// lazyLabels are a request's metric label values, worked out when a
// series of the request is first looked up: a change that adds to no
// series counts no overflow.
type lazyLabels struct {
	u    *usage
	r    *projection.Request
	lv   [MaxMetricLabels]string
	done bool
}

func (l *lazyLabels) get() *[MaxMetricLabels]string {
	if !l.done {
		l.lv, l.done = l.u.labelValues(l.r), true
	}
	return &l.lv
}

// labelValues returns the metric labels' values of a request: its label's
// value when admitted or while the key has room, OverflowValue past the
// cap (counted), "" (no label) when the request has none.
func (u *usage) labelValues(r *projection.Request) [MaxMetricLabels]string {
	var lv [MaxMetricLabels]string
	if len(u.keys) == 0 {
		return lv
	}
	labels := r.Labels
	for i, k := range u.keys {
		v := labels[k]
		if v == "" {
			continue
		}
		if _, ok := u.admitted[i][v]; !ok {
			if len(u.admitted[i]) >= u.maxValues {
				lv[i] = OverflowValue
				u.overflow[i]++
				continue
			}
			v = strings.Clone(v)
			u.admitted[i][v] = struct{}{}
		}
		lv[i] = v
	}
	return lv
}
