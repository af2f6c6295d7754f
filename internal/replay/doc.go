// Package replay owns recomputing the ledger from the stream alone, without
// touching the live buckets: the point-in-time report (the ledger as it
// stood at a stream sequence or a time). It applies the projection's rules
// in stream order in memory: decode, subject check, session ownership by
// the first accepted event, (*projection.Request).Apply.
package replay
