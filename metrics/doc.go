// Package metrics exposes the counters of an agent's ledger.Publisher and
// ledger.Middleware to Prometheus (github.com/prometheus/client_golang).
// The collectors read the counters when scraped, so they cost nothing per
// event or per call; register them in the agent's own registry:
//
//	reg.MustRegister(metrics.PublisherCollector(pub), metrics.MiddlewareCollector(mw))
//
// Publisher metrics: ledger_publisher_events_enqueued_total,
// ledger_publisher_events_acked_total,
// ledger_publisher_events_duplicate_total (acks of an event the stream
// already had), ledger_publisher_publish_retries_total and
// ledger_publisher_events_undelivered_total (set when the publisher is
// closed). Middleware metrics: ledger_middleware_calls_total,
// ledger_middleware_attempts_total, ledger_middleware_retries_total,
// ledger_middleware_rejections_total (breaker open or caller gone),
// ledger_middleware_events_refused_total and ledger_middleware_panics_total.
//
// It is a package of its own so that agents which do not use Prometheus do
// not link it.
package metrics
