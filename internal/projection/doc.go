// Package projection owns the dedup projection of the usage ledger: it
// folds the attempt events of stream LEDGER_ATTEMPTS into one record per
// request_id in KV bucket ledger_requests, one rollup per session in
// ledger_sessions and one per cell (hour, provider, model, labels) in
// ledger_rollups, records every invalid event once in LEDGER_REJECTED, and
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
// harmless. The exceptions are fixed by the request's first accepted event
// in stream order, which every replay agrees on: its session_id, and its
// labels and rollup cell (Request.Cell: that event's started_at truncated
// to the UTC hour, its provider and model), set by Fold when the record is
// created and never changed. label_conflicts counts the log entries whose
// event's labels differ from the record's (a flag kept in the entry), so
// it too is derived from the log. A session record is the sum of its
// requests' contributions (Request.Contribution), and so is a rollup of
// the requests of its cell; those sums are where at-least-once delivery
// bites: a sum is not idempotent.
//
// Fold is the one place where an accepted event meets a record (the
// session-ownership check, then the merge). The aggregator's batches, the
// in-memory replay behind `report --at` and `aggregator verify` all call
// it, so a rule changed there changes everywhere at once, and verify
// compares the live ledger with the same fold, not a second copy of it.
//
// # Exactly once across three buckets
//
// KV buckets cannot be written in one transaction. A crash between the
// request write and the session write either loses the session's delta (if
// the redelivered event finds the request already updated and computes a
// zero delta) or applies it twice (if the session was written and the
// event is applied again). We use the first of the two known-correct
// patterns: in-order processing by a single writer, with per-record
// sequence watermarks and the request record remembering the contribution
// its session had absorbed.
//
//   - One writer. An instance writes only while it holds a lease in bucket
//     ledger_state, and every write is conditional on the fences of its
//     lease term, so that nothing a paused former holder sends after a
//     takeover lands (see Fencing below: the lease is for liveness, the
//     fences are for safety).
//   - In order. The writer reads the stream with an ordered consumer from
//     its checkpoint (ledger_state key "checkpoint": every event at or
//     below it is fully applied) and applies batches in stream order. The
//     checkpoint is the consumer's durable position: it is committed by the
//     same compare-and-set discipline as the records, after them, so it can
//     never run ahead of what is written. A batch that fails for any reason
//     is abandoned and the work starts again from the checkpoint with an
//     empty cache.
//   - Watermarks. A batch covering stream sequences (checkpoint, q] writes
//     every request it changes with Seq = q, Held = what the session held
//     for the request before the batch and HeldCell = what its rollup
//     held, then every session it changes with the absorbed delta and Seq
//     = max(Seq, q), then every rollup likewise, then the checkpoint q.
//     What a session holds for a request is therefore always readable from
//     the two records: the request's contribution if session.Seq >=
//     request.Seq, else request.Held (heldBy); what a rollup holds, the
//     same with the rollup's Seq and HeldCell (heldByCell). The delta a
//     batch adds to a session is contribution(after) - heldBy(before), to a
//     rollup contribution(after) - heldByCell(before), so each is computed
//     from stored state, never from what the crashed batch thought.
//   - Two helds, not one. The session and the rollup are two sums written
//     one after the other, so a crash between them leaves the session
//     holding the new contribution and the rollup the old one. A redo
//     that rewrites the request (it gained an event, or any change) must
//     record both; one Held would hand the rollup the session's value and
//     the rollup would never get its delta (TestRollupsNeedTheirOwnHeld).
//     HeldCell is stored only when it differs from Held, which happens
//     only after such a crash.
//   - One held per cell. A request counts in three rollup cells, one per
//     grain (its hour cell, the day cell and the model-hour cell holding
//     it; see Grain), written one after the other in the same batch; a
//     crash between them leaves them apart, and a redo that crashes again
//     can leave them apart by another cell. So each has its own held
//     (HeldCell, HeldDay, HeldModelHour, each stored only when it differs
//     from HeldCell), read with that cell's own Seq
//     (TestRepeatedCrashAtEveryWritePoint fails with one held for the
//     three). The coarser grains are written only on a ledger projected
//     with them from its first event (checkpoint all_grains): begun
//     mid-life they would hold only the requests since.
//
// Why any crash is safe: the commit order is rejections, requests,
// sessions, rollups, checkpoint, and the next batch starts at the stored
// checkpoint, so every event of the crashed batch is delivered again before
// any later event. If a request was written but its session was not, the
// session's Seq is below the request's, so heldBy gives Held (the old
// value) and the redo adds the full delta once. If the session was written
// too, its Seq reaches the request's, heldBy gives the contribution already
// absorbed, and the redo adds zero. A redo batch may end earlier than the
// crashed one (q' < q); the session's Seq never goes down (max), and a
// request rewritten by the redo gets Seq q' with Held computed the same
// way, so the rule keeps holding. The rollups are a third sum under the
// same rule, with their own Seq and the request's HeldCell: each of the two
// sums is right whatever the crash left of the other. Rejections are
// recorded one at a time in stream order, so the last recorded original
// sequence (read back at every lease term) tells exactly which were
// recorded before a crash. The crash-safety tests stop the aggregator at
// every one of these write points and compare the outcome with an in-memory
// model.
//
// # Fencing
//
// Compare-and-set on each key is not enough on its own: it protects each
// key, not the link between a request's held/seq and its session's seq. A
// holder paused (GC, SIGSTOP, a partition) past the lease TTL while
// another instance takes over can resume, read one record fresh and
// another from its stale cache, and write a request whose held no longer
// matches its session; the next term then adds that request's
// contribution twice. So every write is fenced by the writer's lease term
// (term.go), with conditions the server checks:
//
//   - A term begins, under a freshly acquired lease, by rewriting the
//     checkpoint (compare-and-set on the revision it read) with the term's
//     number, the lease revision; and by writing a fence marker (a delete
//     marker on key "ledger.fence", which no ID can be and no KV reader
//     lists) into each record bucket, learning from its acknowledgement
//     the last sequence of the bucket's stream. It reads the last sequence
//     of the rejection stream too.
//   - Every record write of the term expects its bucket's stream to end
//     where the term knows it ends (Nats-Expected-Last-Sequence, counted
//     through the pipelined writes), besides the key's own revision; every
//     rejection expects the same of the rejection stream; the checkpoint
//     stays compare-and-set on the revision the term last wrote.
//   - So once a term has begun, a write by any earlier term to a bucket it
//     has fenced fails, forever: that writer's idea of the stream's end is
//     behind the marker. Its writes to one bucket stop at the marker, and a
//     writer sends the steps of a batch (rejections, requests, sessions,
//     rollups, checkpoint) one after the other, each only once the previous
//     one is acknowledged in full; whatever of it landed is a prefix of its
//     sequence of writes, landed before the new term read anything. And that
//     writer's batch was computed on a state nobody else wrote during its own
//     term (by the same argument one term earlier). The new term therefore
//     reads exactly what a crash leaves (committed batches and a prefix of
//     one more), and the crash argument above applies unchanged.
//   - Rejections are not fenced by a marker: a rejection's content depends
//     on the stream alone (its sequence, body and the first accepted event
//     of its request), every writer agrees on it, and the expected last
//     sequence keeps the stream a gap-free, ordered list of them whoever
//     appends. A new term reads the original sequence of the last one and
//     records only later ones.
//
// The lease adds liveness and narrows the window. A standby takes over
// only after it has seen the same lease revision for the holder's TTL
// (the one the holder wrote in the lease, never the standby's own) on its
// own clock, so a takeover comes at least that TTL after the holder sent
// its last successful renewal; the holder counts the lease as good for two thirds
// of that, renews every TTL/3 (each renewal gives up at the end of that
// window, well before the TTL), and sends no write outside that window
// nor after it knows the lease is lost. The window is
// not the fence (a process can stop between its check and its write); the
// fences are. TestPausedHolderCannotCountTwice freezes a holder at every
// point of a batch, lets another take over and commit, and resumes it.
//
// # No silent gap
//
// The argument above assumes the writer is given every event after its
// checkpoint. LEDGER_ATTEMPTS holds only attempt subjects and denies
// deletes, so its sequences are consecutive, and the only way an event
// past the checkpoint can be missing is retention (MaxAge, MaxMsgs,
// MaxBytes) or a purge of its start while the aggregator was down or
// behind. A term therefore checks, before it consumes, that the stream's
// first sequence is at most checkpoint + 1, and every batch checks that
// its first new event is the one after the last prepared and that the
// rest follow without a hole (split). A gap stops the aggregator with a
// *GapError (ErrGap), which names the missing range and how to recover,
// and nothing past the checkpoint is written: an ordered consumer asked
// to start at a sequence the stream no longer holds starts at the first
// one it has, and without the check the usage of the missing events
// would vanish without a word. Only a rebuild run with AcceptLoss goes
// on past a gap (Config.AcceptGap); it records each range it accepts in
// ledger_state key "loss" (ReadLoss) before it switches the ledger over.
//
// # Rules
//
// The lease, the checkpoint, a switch and every record carry the
// RulesVersion of the build that wrote them; the checkpoint's is the
// ledger's (the newest that has written it). A term of a build whose
// rules are older than the ledger's (or than a pending switch's) refuses
// to write: Run returns ErrRulesTooOld, whose message says to upgrade, and
// the lease is let go at once so that a newer instance takes over. A
// newer build moves the ledger to its rules when it begins its term;
// records written before keep the old rules until a rebuild. So a rolling
// deploy is safe in both directions: once a newer instance has written,
// older ones stand aside; rolled back, they refuse rather than mix rules.
//
// # Prices
//
// Each accepted event is priced when it is merged (Priced, ApplyPriced):
// its own provider, model, service tier, usage and started_at, in one
// catalog; the entry keeps its cost (Entry.Cost, or Unpriced), and the
// record's usage_cost, billed_cost and unpriced tokens are derived from
// the log like every other field. So a record stays a function of the set
// of its events, for a given catalog, and every argument above holds.
// Which catalog: the version the ledger records in its checkpoint
// ("prices"), read from bucket ledger_prices (package pricebook), where
// every version is stored resolved, so any build prices with it. A term
// prices with that version and writes it with every checkpoint; an empty
// ledger (or one written before pricing) adopts the current catalog when
// a term begins. When a term begins, this build's default catalog merged
// with the current user's file is a catalog change like a loaded file
// (pricebook.Book.AdoptDefault): stored and made current if its version
// differs, then judged below. One that changes the price of an attempt
// the ledger has applied is never used mid-ledger: the writer that holds
// the lease prices with the recorded version (an upgrade whose default
// corrects a past price says so at WARN: verify shows the drift, a
// rebuild re-prices), a standby that takes over reads it from the
// checkpoint, and a build that cannot read that version (stored in the
// old form, the user's file only, or never stored, over a default that
// neither this build's nor one of the past ones it keeps,
// pricing.PastDefaults, gives again) refuses to write (pricebook.ErrUnavailable), as for newer rules. A
// rebuild's scratch ledger adopts the current catalog; its switch records
// that version, so the rebuild re-prices the whole history and the live
// term goes on with it. Verify recomputes with the current catalog: a
// correction shows as a drift in money until the rebuild.
//
// A catalog that only adds prices is adopted without a rebuild, by the
// running term (a KV watch of ledger_prices' current key, which the term
// owns and stops when it ends) or when a term begins. Why that is safe:
//
//   - What is judged is the attempts already applied, not a clock. The
//     checkpoint keeps priced_through, the latest started_at of the
//     attempts the ledger has priced (rounded up to the second; the
//     batch in preparation is counted too, which only makes the judgement
//     stricter). pricebook.ForwardOnly accepts the new catalog only if
//     every entry of the old one is in it with the same prices and every
//     entry it adds takes effect after priced_through. The lookup takes,
//     for an attempt's provider, model (exact ID, else family) and tier,
//     the latest entry in effect at its started_at; an added entry is in
//     effect for no applied attempt, and an exact ID added under a priced
//     family falls back to the family before its date. So every applied
//     attempt costs the same under both versions (a new model's earlier
//     attempts stay unpriced under both), every record is what a rebuild
//     with the new version would make, and verify with it says identical.
//     A new model's price dated before priced_through would price
//     attempts the ledger counted as unpriced: that is a correction, and
//     a rebuild adopts it. (Before, ForwardOnly compared with the
//     process's clock and let any new model through, whatever its date.)
//   - Only between batches. The watch is read before a batch is
//     prepared; on a change the term waits for the batch in flight to
//     commit (priced, and checkpointed, with the old version), judges the
//     change against priced_through, which by then counts every attempt
//     applied, and prices the next batch with the new catalog. That
//     batch's checkpoint is the first to record the new version, so a
//     term that begins after a crash reads the version that priced the
//     records it finds. An attempt of the next batch whose started_at is
//     after an added price's date is priced at that price, as a rebuild
//     prices it; one with an older started_at (a late ingest) is priced
//     by the entries in effect then, the same in both versions.
//   - A ledger whose checkpoint does not keep priced_through (written
//     before it was kept) is judged against the far future: nothing is
//     adopted without a rebuild, whose switch brings the rebuild's mark.
//     The mark is not recomputed at a term's start from the records
//     (the latest started_at in their logs): that is a scan of the whole
//     ledger under a fresh lease, and it would help no ledger of the one
//     build that wrote no mark, whose recorded version is its default
//     catalog (or a file over it) stored in the old form: a build whose
//     default differs cannot read that version to judge a change against
//     it anyway, and one whose default gives it again has no default
//     change to adopt. The rebuild that such a ledger needs brings the
//     mark. (Since builds keep the past defaults, such a build can read
//     that version; it keeps pricing with it until the rebuild, and
//     verify shows what the new catalog would change.)
//
// # Rebuild
//
// Rebuild replays the whole stream under the current code into a scratch
// ledger with this same machinery (its own lease, checkpoint, fences and
// rejections), while the live aggregator keeps serving. One rebuild runs
// at a time: it holds a claim (key "rebuild" in ledger_state, a lease it
// renews), and a second one is refused while the claim is renewed; one
// that loses its claim stops. Leases, claims and requests to yield are
// judged by the TTL their holder wrote, never by the waiter's own, so no
// flag lets a second rebuild (or a standby) take one that is renewed in
// time.
//
// # A rebuild owns its scratch
//
// The claim cannot keep a paused rebuild out: frozen past its claim, it
// resumes believing it still holds it. So no scratch write relies on the
// claim; each relies on ownership and fences.
//
//   - Each rebuild projects into its own scratch set, named for it
//     (ScratchNames): buckets ledger_rebuild_<ULID>_requests, _sessions,
//     _rollups and _state and stream LEDGER_REBUILD_<ULID>_REJECTED, the
//     ULID of its instance ID. It creates the set once it holds the claim, and
//     only its own scratch projection ever writes it, under that
//     projection's lease and term fences exactly as for the live ledger:
//     the first write of a term into each record bucket, empty or not,
//     is its fence marker, and every rejection expects the rejection
//     stream's last sequence. No other rebuild's writer, stale or not,
//     has those names: whatever a stale rebuild sends reaches its own set
//     or nothing.
//   - Scratch sets are never purged (a purge keeps a stream's last
//     sequence, so the expected sequences of a stale writer matched
//     again); they are deleted whole. A rebuild deletes a set only if no
//     recorded switch refers to it, its rebuild does not hold the live
//     lease, and no claim but the deleter's own owns it. It lists the
//     sets first, then reads the claim, the live lease and the
//     checkpoint, in that order. If the claim is its own (a rebuild never
//     takes a claim again once it has lost it, so nobody has held it
//     since), every set it listed was made by a rebuild that held the
//     claim before it: stale, dead or done. If the claim is not its own,
//     it deletes its own set only. A set made after the listing is not
//     touched. A rebuild deletes the leftovers when it starts, and its
//     own set when it ends, unless a recorded switch still needs it.
//   - So a switch does not lose its set to another rebuild. A rebuild
//     records its switch only in its own live term (the write is
//     compare-and-set on the term's checkpoint revision) and only after
//     it has seen its own claim, under that term. If it records a switch
//     to a set a deleter D listed, it saw its claim before D took the
//     claim, so it held the live lease from before D's claim until its
//     record: D reads the lease inside that span and spares the set, or
//     reads the checkpoint after the record and spares it. The one gap:
//     the lease lapsed and a standby rewrote it but had not yet begun its
//     term when the record landed. Then, as for any set found gone, the
//     switch stops before it deletes anything (below), and the next
//     rebuild replaces it. A rebuild that finds its claim taken when it
//     starts, or when it is about to record its switch, stops.
//
// # The switch
//
// To switch over a rebuild asks the live holder to step aside (key
// "yield" in ledger_state, kept fresh while the rebuild lives; a stale one
// is ignored, and a rebuild deletes only its own), takes the live lease
// and begins a term (raising the live fences), lets the scratch projection
// catch up once more and stop, and records the switch in the live
// checkpoint: the scratch set's names, its checkpoint and the message
// counts of its streams (the rollups' too). Then it copies requests,
// sessions and rollups: every scratch record replaces the live one whole,
// live records the new code does not have are deleted, the live
// rejections the term saw are purged (only up to the last sequence it
// read) and the scratch ones appended, and the checkpoint is set to the
// scratch one with the switch cleared. Every one of these writes is
// conditional on the term's fences, so a rebuild paused mid-copy cannot
// write once another term began. Every step writes absolute values, so the
// copy is idempotent, and whoever holds the live lease next finishes a
// switch that was interrupted.
//
// The switch never deletes from an unchecked scratch. Deleting a live key
// is right only because the scratch set lacks it, so before it deletes
// the live keys a bucket's copy did not find, before it purges the live
// rejections, and before it commits the checkpoint, it checks that the
// scratch set still holds what the switch recorded: its checkpoint and
// the message counts of its four streams (three for a switch recorded
// by a build before the rollups, whose scratch set has none: the live
// rollups are then left as they are). A bucket found intact after it
// was read in full was read whole, whatever becomes of it later. If a
// check fails (the set is gone, emptied or changed), the switch stops with
// ErrSwitchIncomplete and deletes nothing: the live ledger may be partly
// switched, but every record copied is the rebuilt one and none is lost;
// the live aggregator refuses to write, and a new rebuild replaces the
// switch. A check that cannot be made (a timeout, a canceled context) is
// an ordinary error, not ErrSwitchIncomplete.
//
// After a switch the live rejections are the scratch ones, which may run
// past the scratch checkpoint (a batch that recorded its rejections and
// never committed). So the term reads its rejection floor again once the
// switch is complete, and the live aggregator, resuming from the scratch
// checkpoint, records only rejections past it. It then applies what was
// published meanwhile. A stream that no longer holds its first events is
// refused, unless the rebuild accepts the loss (RebuildConfig.AcceptLoss;
// see No silent gap).
//
// # Batching
//
// A batch reads each touched key once (from the batch being committed, else
// a bounded cache of the records this writer last wrote, else KV), applies
// all its events in memory, and writes each touched key once: requests as
// one pipelined round of compare-and-set publishes, then sessions as
// another, then rollups, then the checkpoint. A batch costs four round
// trips however many events it holds (three without rollups: Names.Rollups
// empty, which only the benchmark's comparison uses). A new request's
// cell, needed before the fold to read its rollup, is that of its first
// event in the batch, the one Fold gives it.
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
// input, output, cache_read, cache_creation, started_at, finished_at,
// cost] (flags: 1 success, 2 final, 4 unpriced, 8 label conflict; cost
// in nano-USD), ending
// in two indexes into "names" when the entry's provider and model differ
// from the record's, then an object of the usage's subsets and the
// estimated input ({"c1h":…,"rsn":…,"est":…}, each only when not 0) when
// one is not 0; "names" holds each such provider and model once, as
// itself when JSON needs no escape for it and it does not start with "=",
// else "=" and base64. So the largest record the contract allows (1,001
// attempts, each with its own provider and model of the longest and most
// escaped kind, every count, usage subset, estimated input and cost at
// its largest, 16 labels of the longest whose every byte is escaped, and
// the cell's provider and model alike) is 710,664 bytes, under
// MaxRequestRecordBytes (704 KiB), and fits any server's default
// max_payload of 1 MiB with its write headers. "seq" is the batch that
// wrote it, "rules" the RulesVersion that wrote it (0 when missing), and
// "held" appears only when not all zero, "held_cell" only when it differs
// from held; "labels", "label_conflicts" and "cell" (the contract's) only
// when there is one. A session record carries
// "saturated": true only when a sum passed 2^63-1 and stopped there
// (Totals.Add). Readers accept the older layouts too (entries carrying
// their provider and model strings, entries as objects).
//
// A rollup record is a session record's totals after its cell ("hour",
// "provider", "model", "labels"), keyed <YYYYMMDDHH>.<base32 SHA-256 of
// provider, model and sorted labels> (Cell.Key), so that a range of hours
// is a range of keys. ReadRollups reads them all with one ordered
// consumer from each key's last message, skips the hours outside its
// filter by key, and decodes the plain layout without reflection
// (Rollup.UnmarshalJSON; encoding/json for anything else).
//
// Readers such as verify rely on these invariants: a record's seq is the
// batch that last wrote it, a request's session_id, labels and cell never
// change once written, keys with a dot in ledger_requests and
// ledger_sessions (the fence marker) are not IDs, and key ledger.fence is
// not a cell.
//
// # Bounded input
//
// What the aggregator holds of its input is bounded in bytes: pull
// requests of 8 MiB (or the server's max_payload, the largest message a
// stream created without MaxMsgSize may hold), a read-ahead and batches of
// 16 MiB each, and a rejected body kept to its first 64 KiB (input.go).
// Batched reads ask for 4 MiB per reply, eight replies in flight, and
// continue a reply the server cuts short at the same stream sequence,
// checking that the continuation finds every key the server said it left
// out: a key is never taken for absent because a reply was cut.
package projection
