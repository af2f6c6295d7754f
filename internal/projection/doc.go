// Package projection owns the dedup projection of the usage ledger: it
// folds the attempt events of stream LEDGER_ATTEMPTS into one record per
// request_id in KV bucket ledger_requests and one rollup per session in
// ledger_sessions, records every invalid event once in LEDGER_REJECTED, and
// does so exactly once per accepted event although JetStream delivers at
// least once, processes crash, and two instances may overlap.
//
// # The records are a join
//
// A request record keeps a log with one entry per attempt number: the event
// with the smallest event_id for that number. Applying an event either adds
// an entry, replaces one by an event with a smaller event_id, or changes
// nothing; every contract field (status, attempts, winning_attempt, usage,
// billed, times, provider, model) is derived from the log. So a request
// record is a function of the set of its accepted events: order and
// duplicates do not matter, and re-applying an event after a crash is
// harmless. A session record is the sum of its requests' contributions
// (Request.Contribution), and that sum is where at-least-once delivery
// bites: a sum is not idempotent.
//
// # Exactly once across two buckets
//
// Two KV buckets cannot be written in one transaction. A crash between the
// request write and the session write either loses the session's delta (if
// the redelivered event finds the request already updated and computes a
// zero delta) or applies it twice (if the session was written and the
// event is applied again). We use the first of the two known-correct
// patterns: in-order processing by a single writer, with per-record
// sequence watermarks and the request record remembering the contribution
// its session had absorbed.
//
//   - One writer. An instance writes only while it holds a lease in bucket
//     ledger_state, and every write is compare-and-set on the revision it
//     last read or wrote, so a paused former holder fails on its first write
//     after a takeover (the lease is for liveness, CAS is the fence).
//   - In order. The writer reads the stream with an ordered consumer from
//     its checkpoint (ledger_state key "checkpoint": every event at or
//     below it is fully applied) and applies batches in stream order. The
//     checkpoint is the consumer's durable position: it is committed by the
//     same compare-and-set discipline as the records, after them, so it can
//     never run ahead of what is written. A batch that fails for any reason
//     is abandoned and the work starts again from the checkpoint with an
//     empty cache.
//   - Watermarks. A batch covering stream sequences (checkpoint, q] writes
//     every request it changes with Seq = q and Held = what the session held
//     for the request before the batch, then every session it changes with
//     the absorbed delta and Seq = max(Seq, q), then the checkpoint q.
//     What a session holds for a request is therefore always readable from
//     the two records: the request's contribution if session.Seq >=
//     request.Seq, else request.Held (heldBy). The delta a batch adds to a
//     session is contribution(after) - heldBy(before), so it is computed
//     from stored state, never from what the crashed batch thought.
//
// Why any crash is safe: the commit order is rejections, requests,
// sessions, checkpoint, and the next batch starts at the stored checkpoint,
// so every event of the crashed batch is delivered again before any later
// event. If a request was written but its session was not, the session's
// Seq is below the request's, so heldBy gives Held (the old value) and the
// redo adds the full delta once. If the session was written too, its Seq
// reaches the request's, heldBy gives the contribution already absorbed,
// and the redo adds zero. A redo batch may end earlier than the crashed one
// (q' < q); the session's Seq never goes down (max), and a request rewritten
// by the redo gets Seq q' with Held computed the same way, so the rule
// keeps holding. Rejections are recorded one at a time in stream order, so
// the last recorded original sequence (read back at every lease term) tells
// exactly which were recorded before a crash. The crash-safety tests stop
// the aggregator at every one of these write points and compare the
// outcome with an in-memory model.
//
// # Rebuild
//
// Rebuild replays the whole stream under the current code into scratch
// buckets with this same machinery (its own lease, checkpoint and
// rejections), while the live aggregator keeps serving. To switch over it
// asks the live holder to step aside (key "yield" in ledger_state, kept
// fresh while the rebuild lives; a stale one is ignored), takes the live
// lease, lets the scratch projection catch up once more, records the switch
// (key "switch": the scratch checkpoint) and copies: every scratch record
// replaces the live one whole, live records the new code does not have are
// deleted, the rejections are replaced, and the live checkpoint is set to
// the scratch one. Every step writes absolute values, so the copy is
// idempotent, and whoever holds the live lease next finishes a switch that
// was interrupted. Afterwards the live aggregator resumes from the scratch
// checkpoint and applies what was published meanwhile.
//
// # Batching
//
// A batch reads each touched key once (from the batch being committed, else
// a bounded cache of the records this writer last wrote, else KV), applies
// all its events in memory, and writes each touched key once: requests as
// one pipelined round of compare-and-set publishes, then sessions as
// another, then the checkpoint. A batch costs three round trips however
// many events it holds.
//
// Batches are pipelined two deep. While batch N commits on its own
// goroutine, batch N+1 is decoded (in the consumer's goroutine), read,
// applied and encoded on top of N's records: exactly the state N leaves in
// KV if it commits. N+1 is sent only after N's checkpoint is acknowledged,
// with the revisions N's writes returned, so the server sees the same
// writes in the same order as without pipelining and every argument above
// holds unchanged. If N fails, N+1 is dropped unsent and the term ends as
// for any failed batch; the committing goroutine is always waited for
// before a new term reads the checkpoint.
//
// # Stored records
//
// Records are encoded by hand (codec.go). A request record holds the
// contract fields as the contract shows them; the projection's own fields
// are compact: "log" is an array of arrays [attempt, event_id, flags,
// input, output, cache_read, cache_creation, started_at, finished_at] with
// provider and model appended only when they differ from the record's
// (flags: 1 success, 2 final), "seq" is the batch that wrote it, and
// "held" appears only when not all zero. Readers accept the older layout
// (log entries as objects, held always present) too.
package projection
