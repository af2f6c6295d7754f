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
// With WithEnsureStream the publisher creates LEDGER_ATTEMPTS when it is
// missing (whoever starts first, publisher or aggregator, creates what is
// missing): at start and again whenever a publish finds no stream. Failing
// to create it is not fatal; events stay buffered and are retried.
package emit
