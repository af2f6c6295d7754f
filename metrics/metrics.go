package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentledger/ledger"
)

// counter is one counter (or gauge) of a snapshot.
type counter[S any] struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(S) uint64
}

// collector reports the counters of a snapshot taken at each scrape.
type collector[S any] struct {
	snapshot func() S
	counters []counter[S]
}

func (c *collector[S]) Describe(ch chan<- *prometheus.Desc) {
	for _, k := range c.counters {
		ch <- k.desc
	}
}

func (c *collector[S]) Collect(ch chan<- prometheus.Metric) {
	s := c.snapshot()
	for _, k := range c.counters {
		ch <- prometheus.MustNewConstMetric(k.desc, k.kind, float64(k.value(s)))
	}
}

func newCounter[S any](name, help string, value func(S) uint64) counter[S] {
	return counter[S]{desc: prometheus.NewDesc(name, help, nil, nil), kind: prometheus.CounterValue, value: value}
}

func newGauge[S any](name, help string, value func(S) uint64) counter[S] {
	return counter[S]{desc: prometheus.NewDesc(name, help, nil, nil), kind: prometheus.GaugeValue, value: value}
}

// PublisherCollector collects pub's counters: events enqueued, acked,
// acked as duplicates, publishes retried, events undelivered (known once
// pub is closed) and recovered from the outbox, and the outbox's depth
// (gauges, 0 without an outbox).
func PublisherCollector(pub *ledger.Publisher) prometheus.Collector {
	type s = ledger.PublisherStats
	return &collector[s]{snapshot: pub.Stats, counters: []counter[s]{
		newCounter("ledger_publisher_events_enqueued_total", "Attempt events handed to the publisher.", func(s s) uint64 { return s.Enqueued }),
		newCounter("ledger_publisher_events_acked_total", "Attempt events the stream acknowledged, each once.", func(s s) uint64 { return s.Acked }),
		newCounter("ledger_publisher_events_duplicate_total", "Acks saying the stream already held the event.", func(s s) uint64 { return s.Duplicates }),
		newCounter("ledger_publisher_publish_retries_total", "Publishes made again after a failure.", func(s s) uint64 { return s.Retries }),
		newCounter("ledger_publisher_events_undelivered_total", "Events never acknowledged, counted when the publisher is closed.", func(s s) uint64 { return s.Undelivered }),
		newCounter("ledger_publisher_events_recovered_total", "Events read back from the outbox at start, left by an earlier process.", func(s s) uint64 { return s.Recovered }),
		newGauge("ledger_publisher_outbox_events", "Events kept on disk in the outbox until the stream acknowledges them.", func(s s) uint64 { return s.OutboxEvents }),
		newGauge("ledger_publisher_outbox_bytes", "Bytes of the events kept in the outbox.", func(s s) uint64 { return s.OutboxBytes }),
	}}
}

// MiddlewareCollector collects mw's counters: calls, attempts, retries,
// attempts not made (breaker open or caller gone), events the publisher
// refused, and panics.
func MiddlewareCollector(mw *ledger.Middleware) prometheus.Collector {
	type s = ledger.MiddlewareStats
	return &collector[s]{snapshot: mw.Stats, counters: []counter[s]{
		newCounter("ledger_middleware_calls_total", "Logical calls run through the middleware.", func(s s) uint64 { return s.Calls }),
		newCounter("ledger_middleware_attempts_total", "Attempts made.", func(s s) uint64 { return s.Attempts }),
		newCounter("ledger_middleware_retries_total", "Waits before another attempt.", func(s s) uint64 { return s.Retries }),
		newCounter("ledger_middleware_rejections_total", "Attempts not made: circuit open or the caller's context done.", func(s s) uint64 { return s.Rejections }),
		newCounter("ledger_middleware_events_refused_total", "Attempt events the publisher refused.", func(s s) uint64 { return s.SinkErrors }),
		newCounter("ledger_middleware_panics_total", "Panics during a call.", func(s s) uint64 { return s.Panics }),
	}}
}
