// Command gateway is the ledger's HTTP gateway: agents in any language
// point their provider SDK's base URL at it and every model call they make
// is retried, broken and accounted by the ledger, one attempt event per
// attempt, streams to the token.
//
//	gateway [run] [flags]
//	gateway key new NAME
//
// It listens on --listen (default 127.0.0.1:8088; port 0 picks a free
// one: once it accepts connections it prints "gateway listening on
// http://ADDR" on stdout, its only line there, and logs "gateway:
// listening" with addr=ADDR) and forwards each
// provider's routes (at the root for the built-ins, and at /NAME/ for
// every provider) to its --NAME-url, one flag per provider the command
// links: --anthropic-url, --openai-url and --gemini-url (origins with an
// optional path prefix the request's path is appended to; the providers'
// public endpoints by default), running every
// call through the retry middleware (--max-retries, --retry-base-delay,
// --retry-max-delay, --hint-cap) and the guards of each provider and
// model: a circuit breaker (--breaker-threshold, --breaker-cooldown), rate
// limits learned from the providers' rate-limit headers and a retry
// budget, shared with every replica and agent process on the same NATS
// (KV bucket ledger_upstreams, docs/fleet.md) unless --fleet-limits off;
// when NATS is slow or away each decides alone within --fleet-wait. See
// package internal/gateway for what it accounts and how. Package
// github.com/agentledger/ledger/gateway is the same gateway as a library
// (an http.Handler built from options, served with these limits), for a
// program or a test that embeds it.
//
// OpenAI-compatible upstreams are mounted only when named (upstreams.go):
// --upstream NAME=openai-compatible,URL, NAME=PRESET[,URL] or PRESET
// (mistral, groq, deepseek, together, openrouter, vllm, ollama; package
// internal/provider/openai), repeatable, or --upstreams FILE, one a line.
// Clients use http://ADDR/NAME/v1; the ledger records provider NAME, and
// the guards key by it.
//
// Clients authenticate with the keys of --keys FILE (JSON; "gateway key
// new NAME" makes a key and prints the file's entry for it, which holds
// only the key's SHA-256): a request without a known key is answered 401
// and logged at WARN, never with the key. A client presents its key where
// its provider SDK puts the API key (Authorization: Bearer lk-...,
// x-api-key, x-goog-api-key, ?key=) or in X-Ledger-Key; a key may fix or
// constrain the session and hold the provider credentials sent upstream
// in its place (package internal/gateway). Without --keys the gateway
// serves loopback addresses only: any other --listen is refused unless
// --insecure-no-auth, which warns.
//
// A call's labels (docs/contract.md, Labels) are the request's
// X-Ledger-Labels header ("team=search, user=u-42": comma-separated
// key=value pairs, values percent-encoded where they must be) over the
// client key's "labels" over the gateway's --labels, a key set in a later
// one winning. A bad header is answered 400 before any attempt, naming
// the header, the key and the rule, and logged at WARN; the header never
// goes upstream.
//
// It connects to NATS with the nats CLI's flags (--nats-url, --creds,
// --nkey, --tls-ca, --tls-cert, --tls-key, --context, or their NATS_*
// environment variables; default nats://127.0.0.1:4222; --inbox-prefix
// for the gateway role of docs/security.md), publishes the
// attempt events on LEDGER_ATTEMPTS (which must exist, unless
// --create-stream), and keeps the attempt numbers of the requests clients
// name in the KV bucket ledger_gateway_attempts (created when missing,
// entries expiring --attempt-numbers-ttl after their last use), shared by
// every replica; a request that bucket no longer holds is looked up in
// the ledger's ledger_requests (read only), so that its attempt numbers
// continue and it stays in its session.
//
// One client cannot stop it: at most --max-connections client
// connections are open (lowered to the file descriptor limit less a
// reserve; new ones wait at the cap), headers must arrive within
// --header-timeout, a body within --body-timeout plus a second per
// --min-body-rate bytes, each write within --write-timeout (a stream
// lasts as long as its events come), an idle keep-alive connection is
// closed after --idle-timeout; one client (a digest of its credential)
// has at most --max-calls-per-client requests in flight (429 beyond), and
// the request bodies held at once are at most --max-body-bytes-in-flight
// (503 with retry-after beyond); at most --max-estimates tokenizer
// estimates (the input of an OpenAI stream whose usage never came) run at
// once, and one past it is skipped (refusal reason estimate_skipped),
// never waited for. Refusals and accept errors are logged at
// WARN, at most once a second per reason, and counted. With
// --metrics-addr it serves /metrics (requests, refusals by reason,
// connections, bodies in flight, events queued and undelivered),
// /healthz and /readyz (connected to NATS) on that address, as the
// aggregator does; never on --listen, whose paths are the providers'.
//
// OpenTelemetry is off unless the standard environment turns it on
// (package internal/telemetry, docs/telemetry.md): with
// OTEL_EXPORTER_OTLP_ENDPOINT (or a signal's own endpoint, or
// OTEL_TRACES_EXPORTER / OTEL_METRICS_EXPORTER=otlp) it exports over
// OTLP/HTTP a GenAI span per call and per attempt and the
// gen_ai.client.token.usage and gen_ai.client.operation.duration
// histograms, as service "ledger-gateway" unless OTEL_SERVICE_NAME says
// otherwise; OTEL_SDK_DISABLED=true turns it off. An exporter or protocol
// it does not have (grpc) is a usage error naming the variable.
//
// SIGINT and SIGTERM stop it: it stops accepting requests, lets those in
// flight finish within --shutdown-timeout (then cuts them), and flushes
// the events within --drain-timeout, then the telemetry within
// --drain-timeout again. With --outbox DIR every event is on
// disk before its call is answered until the stream acknowledges it; what
// is left at the end (or after a crash) stays there, and the next start on
// DIR delivers it. Exit status: 0 when stopped so (events kept in the
// outbox included); 1 when some event could not be delivered and is lost;
// 2 for a usage or runtime error (bad flags, NATS unreachable or refusing
// a permission, which the error names, no stream, the address in use).
package main
