// Package fleet owns the state that every process of a fleet shares about
// each upstream, kept in the KV bucket ledger_upstreams on the ledger's
// NATS server (docs/fleet.md describes every key and value). A Fleet is
// the guard.Shared backend of one process: with it, the middlewares of all
// processes see one circuit breaker, one rate-limit capacity and one
// retry budget per upstream.
//
//   - Breaker (key breaker.<upstream>): retryable failures are counted
//     fleet-wide; the process whose report reaches the threshold writes
//     the open state, and every process's watcher sees it within
//     milliseconds (the bucket is watched; nothing is polled). After the
//     cooldown the single probe of the whole fleet is claimed by
//     compare-and-set (the claim lasts at least the attempt timeout; a
//     holder whose heartbeat stops loses it), and its result, written
//     during the call, closes or reopens the breaker for everyone. Every
//     change of state is told to Options.OnBreakerChange.
//   - Limits (limits.<upstream>): the per-minute limits learned from the
//     providers' rate-limit headers by any process, and, for an upstream
//     with none learned or configured, the requests limit inferred from
//     its 429s (guard.Inferred). A 429 spends its reservation and empties
//     the buckets: the fleet was ahead.
//   - Hold (hold.<upstream>): a 429 with a hint seen by any process holds
//     every process until then.
//   - Capacity (capacity.<upstream>): one token bucket per limited
//     dimension, modelling the provider's. A process takes capacity in
//     chunks (compare-and-set) sized to its recent demand and its share,
//     and spends a chunk locally, so a call pays no round trip while its
//     chunk lasts; what a chunk does not use in one burst window is lost,
//     which errs on the side of the limit. The record also carries an
//     estimated cost of one attempt, which a process reserves until its
//     own attempts give it one, and the buckets hold no more than the
//     provider last said remained.
//   - Budget (budget.<upstream>): first attempts and retries per slot of
//     a sliding window; first attempts are added in batches, and each
//     retry is taken by compare-and-set, so retries never exceed the
//     budget of the first attempts already counted.
//   - Processes (process.<id>): each process's heartbeat; a degraded
//     process divides its local limits by the number alive.
//
// # Degrading
//
// Every NATS operation on a call's path is bounded by Options.Wait. When
// NATS is unreachable or slow (a disconnection, a timeout, a watcher that
// ends) the Fleet is unhealthy and every Guard decides with its local
// state until the connection is back and the watcher has caught up; the
// Fleet logs each change of mode once. Writes that are not on a call's
// path (reports of failures, holds, learned limits, batches of first
// attempts) are made by the Fleet's own goroutine.
//
// The Fleet owns two goroutines (the watcher and the maintainer, which
// writes, heartbeats and recovers); Close stops both, after writing what
// the process owes the fleet under a fresh timeout and giving up a probe
// it still holds. Time comes from
// Options.Now: records hold wall-clock times, so the clocks of a fleet's
// machines must agree to well within a cooldown (NTP does).
package fleet
