// Package monitor owns what operators see of a running aggregator or
// gateway: its Prometheus metrics (/metrics) and health endpoints
// (/healthz: the process is alive; /readyz: connected to NATS, and for
// the aggregator holding the lease or standing by with the lag known),
// served by `aggregator run --metrics-addr` and `gateway run
// --metrics-addr` on a listener of their own (Serve: timeouts and a
// connection cap), never on the gateway's proxy listener.
//
// The gateway's metrics are listed at NewGatewayRegistry. The
// aggregator's:
//
//	ledger_aggregator_lag_events           gauge: the stream's last sequence minus the ledger's checkpoint
//	ledger_aggregator_checkpoint_sequence  gauge: the ledger's checkpoint
//	ledger_aggregator_events_applied_total counter: events this process applied
//	ledger_aggregator_rejected_total       counter, label reason: events this process rejected
//	ledger_aggregator_batch_seconds        histogram: time to apply and commit a batch
//	ledger_aggregator_lease_held           gauge: 1 while this process holds the lease
//	ledger_aggregator_gap_events           gauge: events past the checkpoint the stream no longer holds (the aggregator stops; see projection.GapError)
//
// and the usage series, by provider and model and the request labels an
// operator names (`--metric-labels team,user`, UsageOptions), never by
// session or request:
//
//	ledger_tokens_total{kind="usage|billed",type="input|output|cache_read|cache_creation|reasoning"}
//	ledger_cost_total{kind}                       US dollars, each attempt at its own price
//	ledger_unpriced_tokens_total{kind}            input and output tokens without a price
//	ledger_requests_total{outcome="pending|succeeded|failed"}
//	ledger_attempts_total{outcome="success|<error kind>|error"}
//	ledger_metric_label_overflow_total{key}       request changes counted under __overflow__
//	ledger_metric_decreases_skipped_total{metric} decreases a usage counter did not take
//
// plus the Go runtime's and the process's collectors. Nothing here runs
// per event: the counters of the aggregator are read when scraped, the lag
// and checkpoint are polled once per interval, and a batch is observed
// once when it commits.
//
// The aggregator reports batches and rejections through its
// projection.Observer, which Metrics implement, and the request records
// each batch wrote, before and after, through projection.ChangeObserver.
// The usage series count exactly what this process applied: the
// difference of each record across a committed batch, reported once its
// checkpoint is written. So an event delivered twice (a publisher's resend
// past the duplicate window, a redelivery after a crash) counts once: its
// second copy changes no record. A batch that fails before its checkpoint
// is counted by no one (its writes, found by the next term, are already in
// the records): the series undercount a failed batch, never double-count.
//
// Usage (kind="usage", a request's winning attempt) and its requests are
// counted under the provider and model of the winning attempt (else the
// latest one); billed tokens, money and attempts under each attempt's
// own. A request is counted in ledger_requests_total when it enters a
// status: outcome="pending" once, when first recorded without a final
// attempt (so a request whose only attempt succeeds at once is never
// pending), then succeeded or failed when it reaches it. An attempt is
// counted once, when first recorded, under its outcome then: success or
// its error kind ("error" when the kind is not known). A counter never
// goes down: a change that would make a series smaller (an event that
// replaces a recorded one with a smaller event_id and less usage or
// another outcome, a request leaving a final status) is not subtracted,
// and is counted in ledger_metric_decreases_skipped_total{metric}, once
// per series and request change; the ledger's records stay the truth.
//
// A metric label takes the request's label value (its first accepted
// event's, as the rollups); each key keeps at most UsageOptions.MaxValues
// distinct values (first come, first served, per process), and the
// requests of other values are counted under __overflow__, each change so
// counted adding one to ledger_metric_label_overflow_total{key}. A
// request without the label has none ("" in PromQL).
package monitor
