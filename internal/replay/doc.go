// Package replay owns recomputing the ledger from the stream alone, in
// memory, without writing anything: the point-in-time report (the ledger as
// it stood at a stream sequence or a time) and Verify (the live buckets
// compared with a recomputation under the current code, while the live
// aggregator runs). It applies the projection's own rules in stream order
// (projection.Accept, session ownership by the first accepted event, the
// merge), so a replay cannot disagree with the aggregator on what counts.
package replay
