// Command publisher puts attempt events into the ledger's stream.
//
//	publisher simulate [flags]      run a simulated fleet against a fake provider
//	publisher ingest [flags] [FILE|-]  publish JSON-lines events from a file or stdin
//
// Both connect to NATS (--nats-url, or $NATS_URL, default
// nats://127.0.0.1:4222), create LEDGER_ATTEMPTS when it is missing, and
// publish every event through the asynchronous publisher of package emit,
// on ledger.attempts.<session_id>.<request_id> with the event ID as
// Nats-Msg-Id. SIGINT and SIGTERM stop the work; what was enqueued is still
// flushed, within --drain-timeout.
//
// Exit status: 0 when everything was published; 1 when some event was
// undelivered or (ingest) some line was invalid; 2 for a usage error or
// when NATS cannot be reached; 130 when interrupted.
package main
