// Command publisher puts attempt events into the ledger's stream.
//
//	publisher simulate [flags]      run a simulated fleet against a fake provider
//	publisher ingest [flags] [FILE|-]  publish JSON-lines events from a file or stdin
//	publisher fakeprovider [flags]   serve the fake provider over HTTP, for the gateway
//
// simulate labels its calls with --labels, and with --teams N session
// i's calls with team=team-<i % N> too, so that a run can be reported by
// label.
//
// ingest reads one attempt event (the contract's JSON) per line; each is
// checked as the aggregator checks it, its labels included, and an invalid
// line is reported on stderr with its number, the reason and the detail
// (for labels: the label and the rule, labels["team"]: value must be 1 to
// 128 bytes, got 0) and skipped, the valid ones published. --labels adds
// default labels to every event, under the event's own.
//
// fakeprovider serves the simulator's fake provider on --listen at the
// providers' own paths, with simulate's fault flags (and --broken-stream),
// until SIGINT/SIGTERM, and then writes its ground truth to --truth. It
// needs no NATS.
//
// simulate and ingest connect to NATS with the nats CLI's flags (--nats-url, --creds,
// --nkey, --tls-ca, --tls-cert, --tls-key, --context, or their NATS_*
// environment variables; default nats://127.0.0.1:4222), check that
// LEDGER_ATTEMPTS exists (--create-stream creates it when missing, and
// warns when the existing one differs from --replicas and
// --duplicate-window), and publish every event through the asynchronous
// publisher of package emit, on ledger.attempts.<session_id>.<request_id>
// with the event ID as Nats-Msg-Id. SIGINT and SIGTERM stop the work; what
// was enqueued is still flushed, within --drain-timeout. With --outbox DIR
// every event is kept on disk until the stream acknowledges it, and what a
// stopped or killed run left there is delivered by the next run on DIR
// (its summary says how many were recovered and kept). --inbox-prefix
// gives the publisher role of docs/security.md its own reply subjects. Logs go to stderr
// as text or JSON (--log-format).
//
// Exit status, the same as the aggregator's: 0 when everything was
// published; 1 when some event was undelivered or (ingest) some line was
// invalid; 2 for a usage or runtime error: bad flags, NATS unreachable or
// refusing the credentials, no stream, or an interrupted run (the shell's
// 130 for SIGINT was dropped so that every command says the same).
package main
