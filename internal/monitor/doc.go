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
// plus the Go runtime's and the process's collectors. Nothing here runs
// per event: the counters of the aggregator are read when scraped, the lag
// and checkpoint are polled once per interval, and a batch is observed
// once when it commits.
//
// The aggregator reports batches and rejections through its
// projection.Observer, which Metrics implement.
package monitor
