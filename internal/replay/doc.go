// Package replay owns recomputing the ledger from the stream alone,
// without writing to it: the point-in-time report (the ledger as it stood
// at a stream sequence or a time, in memory) and Verify (the live
// buckets and rejections compared with a recomputation under the current
// code, while the live aggregator runs, in memory bounded whatever the
// ledger's size). Both apply the projection's own rules in stream order
// (projection.Accept, session ownership by the first accepted event, the
// merge), so a replay cannot disagree with the aggregator on what counts.
//
// # Verify: what it compares, and at which point
//
// Verify reads the live checkpoint P first. The live checkpoint only
// grows (a rebuild's switch is the exception, and Verify refuses to run
// during one), and a batch (c, q] writes its records before its
// checkpoint, so a live record read after P was committed, carrying the
// watermark s of the batch that last wrote it, is the projection of the
// stream up to P if s <= P, and up to s otherwise. Every record is
// compared at that point: P, or its own s. A record is compared once.
//
// Money: the recomputation prices every attempt with the current catalog
// of ledger_prices (the point-in-time report with the ledger's own), so
// a catalog loaded after the ledger was priced shows as differences in
// usage_cost, billed_cost and the unpriced tokens, summed in the Drift's
// money deltas, until a rebuild re-prices the ledger.
//
// Sessions: right after P, Verify reads every live session record once
// (ledger_sessions streamed in order). Those with s > P are few (written
// by batches committed while it read them) and set the target T, the
// highest of them (P when there are none). A session's recomputed totals
// are summed from its requests as each request is finished (below), at P
// and, for a late session, at its s.
//
// Rollups: the cells of ledger_rollups are read and compared exactly as
// the sessions are (a cell is a sum of requests, keyed by Cell.Key): read
// once right after P, the late ones raising T, and each recomputed
// request's contribution added to its cell (its record's cell, fixed by
// its first accepted event) at P and at the cell's own sequence. They go
// to a scratch bucket past the same bound. The Drift counts them apart
// (RollupsChecked, RollupsDiffer, differences of kind "rollup"); its
// token and money deltas sum the sessions only.
//
// Requests: Verify replays the stream from 1 to T once, in batches. A
// request is held only while it is in progress: from its first message to
// the last message on its subject ledger.attempts.<session>.<request> up
// to T. Its accepted events are exactly those on that subject (an event
// naming another session is a session conflict and changes nothing), so
// when its first batch is read, one batched direct get (multi_last with
// up_to_seq T, asked only from the batch's end on, so the server loads
// nothing for requests the batch finishes) gives that last message; when
// the replay has applied it, the request is finished at T, and Verify also
// holds it as it stood at P (and its events in (P, T]), so it is known at
// every point from P to T. It is then compared with its live record, at P
// or at its s (past T, its own events in (T, s] are read by subject and
// applied), added to its session's totals, and dropped. The live records
// come through a window that streams ledger_requests in the order they
// were written, which is nearly the order in which requests finish (the
// aggregator writes a request in the batch of its last change); a request
// the window misses is read by a direct get.
//
// A request met again after it was finished is met through a session
// conflict (its own subject has no more messages). The replay does not
// keep every request it finished; it keeps a Bloom filter of them: a
// request the filter has not seen is new, with no lookup. Otherwise the
// live record vouches for the session that owns the request: it was
// compared when the request finished. A live record under the event's
// session, or absent, with the request not in the drift set, means the
// request is new. The drift set holds the requests whose live record could
// not vouch when they finished (absent, unreadable, under another
// session): for those the event is a conflict. A live record under another
// session S means a conflict if S's subject has an accepted event of the
// request before this one, else a new request with a wrong live record
// (reported when it finishes). Verify assumes the live aggregator never
// rewrites a record under another session while it runs (a record written
// so would be reported, but could mislead this step).
//
// Rejections: LEDGER_REJECTED holds one record per rejected stream
// sequence, in that order (the single writer records them one at a time).
// The replay produces its rejections in the same order, so the two are
// merged as the replay goes, up to P: a record missing, one the replay
// does not have, and one whose reason, original subject or body differ
// are differences of kind "rejection".
//
// Live records the replay did not produce (a record for a request the
// stream does not have, or one created after T): every request the replay
// finished read its live record once. Keys of ledger_requests are never
// removed (a delete leaves a marker), so if the bucket has as many
// subjects as those reads found, every live key was compared. Otherwise
// (live traffic created requests, or the ledger has records the stream
// does not), Verify streams the live records and asks the stream, under
// the session each names, whether the replay produced it; those it did
// not are compared at P, at their s, or (past T) with the request
// recomputed from its events after T.
//
// # Bounded memory
//
// Verify holds: a batch being applied and the next one being read (8,192
// messages each), the requests in progress (20,000 at most; normally a
// few hundred: the attempts of a call are close together), the window of
// live records (32,768), the sessions (200,000) and as many rollup
// cells, the drift set (100,000 IDs, empty for a ledger without such
// drift), the Bloom filters (16 MiB and 1 MiB each), and the first
// differences it prints (--limit). Past a
// bound, requests in progress, sessions and drift entries go to scratch
// KV buckets on the server, written only then: requests in progress
// furthest from their last message are written whole and read back at
// their next message (a Bloom filter says which may be there); sessions
// are partial sums, merged into the bucket; drift entries are written
// once. So the memory is a constant, and the server holds what a ledger
// beyond the bounds needs. The late sessions are bounded too (100,000): a
// live aggregator rewriting more while Verify reads them ends Verify with
// ErrTooBusy (exit 2), never a silent truncation. Verify runs under a
// 160 MiB soft memory limit (MemoryLimit).
//
// Scratch buckets are named ledger_verify_<ULID>_<use>: two verifies at
// once never share one, and none can meet a rebuild's (ledger_rebuild_*)
// or the live ledger's. Verify deletes them when it ends (also when
// interrupted); each holds a heartbeat its verify rewrites every 20s, and
// the next verify that needs scratch space deletes those of dead ones
// (no heartbeat for two minutes).
//
// # Nothing dropped, nothing skipped
//
// Verify says "identical" only if it saw everything it compared. Its
// batched direct gets queue their answers in a subscription without a
// pending limit: what it asks bounds them (one message per subject of a
// multi_last request, a batch of a next_by_subj one), so no answer is
// dropped for want of room; a subscription that does drop one makes the
// read fail at once (the answer is never asked again). Its consumers (the
// stream, the buckets, the rejections) read through Consume, whose
// handler waits for the reader: a slow or paused reader holds the next
// pull back, and what has arrived queues in the subscription under the
// client's limits (500,000 messages, 64 MiB), far above a pull and the
// statuses that follow it. (Messages, used before, queued in a channel
// exactly one pull long; the "409 Batch Completed" status that ends a pull
// with a byte limit, and the rest of the previous pull when the next was
// asked early, overflowed it whenever the reader paused: `make bench` on a
// loaded machine failed so. See pull.go.) The connection's
// slow-consumer reports are watched for the whole run (its error
// callback and its last error): one during a verify makes it fail with
// ErrSlowConsumer (exit 2, could not compare), whatever it compared. The
// replay checks that the stream's sequences follow each other: a hole
// (events removed while it read) is ErrIncomplete. A stream whose first
// events are gone is refused, unless the ledger records their loss
// (projection.ReadLoss, after `aggregator rebuild --accept-loss`): then
// the replay starts at the stream's first sequence.
//
// # Why not the alternatives
//
// Projecting into scratch buckets with the aggregator's machinery and
// then comparing bucket to bucket would write every record once more: the
// aggregator's cost (it is bound by the server's per-write cost) plus the
// comparison, so slower than the aggregator. The replay here reads the
// stream once, writes nothing on a ledger within its bounds, and reads
// each live record once through a consumer; its server-side cost per
// request is a subject lookup, so it runs faster than the aggregator
// catches up (make bench measures both on the same ledger).
package replay
