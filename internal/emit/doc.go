// Package emit owns the asynchronous JetStream publisher of attempt events:
// the production implementation of retry.Sink. It takes every event the
// retry middleware hands it, enqueues it without waiting on the network,
// and a background loop publishes it to
// ledger.attempts.<session_id>.<request_id> with the event ID as
// Nats-Msg-Id, pipelining publishes and awaiting their acks.
//
// Guarantees:
//
//   - Nothing is dropped silently. A publish that fails (ack timeout, no
//     stream, connection loss, …) is retried with the same event ID, so the
//     stream's duplicate window discards a copy that did land, after a
//     capped, jittered exponential backoff. An event that still has no ack
//     when the publisher is closed is counted as undelivered and Close says
//     how many there were.
//   - Publish never waits on network I/O. It marshals the event, then
//     enqueues it into a bounded buffer; it blocks only while that buffer is
//     full (backpressure), until the publisher makes room, its context ends
//     or the publisher is closed.
//
// Ownership: New starts the publisher's one background goroutine and Close
// ends it, so whoever calls New must call Close (typically deferred in the
// command that owns the NATS connection, before closing that connection).
// Close first drains: it stops accepting events, keeps publishing and
// retrying what is buffered until every event is acked or Close's context
// ends, then reports Stats and, when some events were never acked, an
// *UndeliveredError. Flush waits for the events enqueued so far without
// closing.
//
// # Outbox
//
// Without an outbox the events a Publisher holds live in memory: a process
// that ends (or is killed) during a NATS outage loses them, and Close says
// how many. WithOutbox(dir) keeps them on disk as well: Publish writes the
// event to an append-only log in dir and waits for its fsync (concurrent
// calls share one fsync) before it enqueues it, and the loop forgets the
// record once the stream acknowledged the event. New on the same directory
// publishes again every event the log still holds, so a SIGKILL during an
// outage loses nothing; Close leaves what was not acknowledged in the log
// (Stats.Kept, UndeliveredError.AllKept).
//
// Exactly once: an event is published again with its own event ID as
// Nats-Msg-Id, so a copy that had landed within the stream's duplicate
// window (LEDGER_ATTEMPTS: 2 minutes by default, --duplicate-window) is
// dropped by the stream and counted in Stats.Duplicates. A copy that
// arrives later is stored, but the projection keeps one entry per attempt
// number and event ID (package projection), so the ledger counts it once
// anyway. The log reclaims acknowledged records as it goes (a segment whose
// events were all acked is deleted or truncated), so only a crash between
// an ack and the reclaim republishes an event that had landed.
//
// The outbox is bounded (WithOutboxLimits: events and bytes). When it is
// full Publish waits for acks to free room, and when its context ends
// first it returns an error wrapping ErrOutboxFull: the event is refused
// and the caller told, never dropped silently. Its depth is in Stats
// (OutboxEvents, OutboxBytes); InspectOutbox reads a directory without
// opening it. The outbox makes what the Publisher holds durable; it does
// not hold more than fits in memory (the queue is sized to its limit).
// A file lock gives the directory one owner at a time. A write whose fsync
// fails is refused (Publish returns the error); its record may still be in
// the file and be published at the next start, which the event ID makes
// harmless if the caller published the event again meanwhile.
//
// A NATS leaf node with a local JetStream stream (sourced into
// LEDGER_ATTEMPTS) was considered instead: it would make the outbox a
// second server to configure, secure and monitor next to every gateway and
// agent, and the library could not offer it as one option (ledger.WithOutbox).
// A log of fsynced records is a few hundred lines, has no moving parts and
// fails in one way (the disk). Deployments that run a leaf node anyway can
// publish to it without an outbox.
//
// With WithEnsureStream the publisher creates LEDGER_ATTEMPTS when it is
// missing (whoever starts first, publisher or aggregator, creates what is
// missing): at start and again whenever a publish finds no stream. Failing
// to create it is not fatal; events stay buffered and are retried.
package emit
