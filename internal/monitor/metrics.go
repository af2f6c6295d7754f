package monitor

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/projection"
)

// Source is what the metrics read of an aggregator when scraped;
// *projection.Aggregator is one.
type Source interface {
	// Applied is the stream sequence this process has applied through.
	Applied() uint64
	// Leading reports whether this process holds the lease.
	Leading() bool
	// Stats are the process's counters.
	Stats() projection.Stats
}

// Metrics implement projection.Observer: the aggregator tells them of
// every committed batch and every rejected event, and (ChangeObserver) of
// the request records each batch wrote, before and after.
var (
	_ projection.Observer       = (*Metrics)(nil)
	_ projection.ChangeObserver = (*Metrics)(nil)
)

// reasons are the reject reasons of the contract, whose counters exist
// (at 0) from the start.
var reasons = []events.Reason{
	events.ReasonTooLarge, events.ReasonMalformedJSON, events.ReasonUnknownSchema, events.ReasonInvalidField,
	events.ReasonSubjectMismatch, events.ReasonSessionConflict,
}

// Metrics are the aggregator's collectors, registered in their own
// registry.
type Metrics struct {
	Registry *prometheus.Registry

	lag, checkpoint prometheus.Gauge
	batch           prometheus.Histogram
	rejected        *prometheus.CounterVec
	// headGap is the gap the last poll saw at the stream's head.
	headGap  atomic.Uint64
	byReason map[string]prometheus.Counter
	other    prometheus.Counter
	// usage are the usage series: tokens, money, requests and attempts
	// by provider, model and the metric labels (never by session or
	// request).
	usage *usage
}

// NewMetrics makes the collectors over src, with the usage series'
// labels chosen by o (validated).
func NewMetrics(src Source, o UsageOptions) (*Metrics, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ledger_aggregator_lag_events",
			Help: "Events in LEDGER_ATTEMPTS not yet applied: the stream's last sequence minus the ledger's checkpoint."}),
		checkpoint: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ledger_aggregator_checkpoint_sequence",
			Help: "The ledger's checkpoint: every event up to this stream sequence is applied."}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ledger_aggregator_batch_seconds",
			Help:    "Time to apply and commit one batch.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12)}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ledger_aggregator_rejected_total",
			Help: "Events this process recorded in LEDGER_REJECTED, by reason."}, []string{"reason"}),
		byReason: make(map[string]prometheus.Counter, len(reasons)),
		usage:    newUsage(o),
	}
	for _, r := range reasons {
		m.byReason[string(r)] = m.rejected.WithLabelValues(string(r))
	}
	m.other = m.rejected.WithLabelValues("other")
	applied := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ledger_aggregator_events_applied_total",
		Help: "Events this process applied to the ledger."}, func() float64 { return float64(src.Stats().Events) })
	held := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ledger_aggregator_lease_held",
		Help: "1 while this process holds the lease and writes the ledger, 0 on standby."}, func() float64 {
		if src.Leading() {
			return 1
		}
		return 0
	})
	gap := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ledger_aggregator_gap_events",
		Help: "Events the ledger has not applied that LEDGER_ATTEMPTS no longer holds (retention or a purge removed them); " +
			"above 0 the aggregator stops until the stream is restored or `aggregator rebuild --accept-loss` runs."}, func() float64 {
		return float64(max(m.headGap.Load(), src.Stats().GapEvents))
	})
	m.Registry.MustRegister(m.lag, m.checkpoint, m.batch, m.rejected, m.usage, applied, held, gap,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m, nil
}

// BatchCommitted implements projection.Observer.
func (m *Metrics) BatchCommitted(_ int, took time.Duration) { m.batch.Observe(took.Seconds()) }

// RequestsCommitted implements projection.ChangeObserver: the usage
// series gain what the batch's request records gained.
func (m *Metrics) RequestsCommitted(c projection.Changes) { m.usage.RequestsCommitted(c) }

// Rejected implements projection.Observer.
func (m *Metrics) Rejected(reason string) {
	if c, ok := m.byReason[reason]; ok {
		c.Inc()
		return
	}
	m.other.Inc()
}

// setPosition records the stream's first and last sequences and the
// checkpoint: the lag, and the gap when the stream's first event is past
// the checkpoint + 1.
func (m *Metrics) setPosition(first, last, checkpoint uint64) {
	m.checkpoint.Set(float64(checkpoint))
	m.lag.Set(float64(last - min(checkpoint, last)))
	var gap uint64
	if first > checkpoint+1 {
		gap = first - 1 - checkpoint
	}
	m.headGap.Store(gap)
}
