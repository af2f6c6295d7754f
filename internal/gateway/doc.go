// Package gateway owns the ledger's HTTP gateway: a proxy that speaks the
// providers' own APIs, so that an agent in any language reaches the ledger
// by changing its SDK's base URL alone, and that runs every model call
// through the retry middleware (internal/retry) and its circuit breakers,
// publishing one attempt event per attempt, accounted to the token, with
// streams relayed event by event.
//
// # Providers, mounts and routes
//
// The gateway speaks for the providers of a registry (Config.Providers,
// a provider.Registry; nil: the built-in ones, Anthropic, OpenAI and
// Gemini, which a program links with internal/provider/builtin). It knows
// nothing of any provider's API itself: each provider (package
// internal/provider and its folders) says which paths it accounts
// (Match), what the gateway reads of a request and adds to it (Inspect:
// the model, the stream flag, OpenAI's stream_options.include_usage),
// the usage of a body and of a stream (BodyUsage, NewStream), how its
// errors are classified, its error body, its credential headers and its
// rate-limit headers.
//
// Every provider is served under its mount, /NAME/: the mount is
// stripped and the rest of the path is the provider's
// (http://gateway/anthropic/v1/messages,
// http://gateway/mistral/v1/chat/completions). The providers whose
// Upstream says AtRoot (the three built-ins, whose paths do not collide)
// are served at the root as well, at their own paths, as before mounts
// existed:
//
//	POST /v1/messages                                       anthropic
//	POST /v1/chat/completions, /v1/responses, /v1/embeddings openai
//	POST /v1beta/models/{model}:generateContent              gemini
//	POST /v1beta/models/{model}:streamGenerateContent        (v1 and v1alpha too)
//
// A provider added later (an OpenAI-compatible upstream) is reached at
// its mount only. At the root, a provider's accounted path comes first,
// then a mount, then the passthrough: the first provider at the root
// whose Upstream.Passthrough recognises the request (Gemini's paths and
// key, Anthropic's version header and key, then OpenAI's /v1/); a
// request none of them takes is answered 404 no_route (a client of an
// unmounted /ollama/ gets that, and its key goes nowhere). At a mount,
// whatever the provider does not account is passed through to it.
// Passthrough requests are proxied unchanged and not accounted (the log
// says so once per path).
//
// # Origins
//
// A provider's requests go to its origin: Config.Upstreams[NAME] when
// set, else the provider's own (Upstream().Origin); an Upstreams entry
// whose name is not one of the providers' is an error naming the field.
// An origin is a scheme, a host and an optional path prefix
// (ParseOrigin), and the upstream URL is the origin's path followed by
// the request's path after the mount, with the query as received: with
// origin http://127.0.0.1:9090/openai, POST /openai/v1/chat/completions
// (or, at the root, /v1/chat/completions) goes to
// http://127.0.0.1:9090/openai/v1/chat/completions.
//
// The events record the provider's Name, and the breaker and the guards
// of a call are keyed by it (NAME/model): an OpenAI-compatible upstream
// shares OpenAI's routes, never its breaker or its limits.
//
// # Identity
//
// The session is the header X-Ledger-Session-Id, else
// Config.DefaultSession. The request is X-Ledger-Request-Id, else the
// Idempotency-Key (as it is when it follows the contract's ID rule, else
// "idem-" and a digest of it), else a new ULID. Every answer carries
// X-Ledger-Request-Id. An ID that breaks the rule is answered 400, naming
// the header.
//
// A client that retries anyway, with the same request ID, gets further
// attempts of the same request: the numbers a call may use
// (MaxRetries+1) are reserved in AttemptNumbers before it starts and the
// unused ones given back after, in a JetStream KV bucket shared by every
// replica (KVAttempts), so that no two events of a request ever share an
// attempt number (the contract would count the second as a duplicate and
// lose a billed attempt). A request whose numbers cannot be reserved
// (the store unreachable) is refused with 503 rather than risk it; one
// that has used all 1,001 numbers the contract allows is refused with
// 409.
//
// A request ID is owned by the session of its first call: the bucket
// keeps the session with the next number, and a request the bucket does
// not hold (new, or its entry expired after the bucket's TTL) is looked
// up in the ledger's own record of it (RequestLedger, bucket
// ledger_requests). A call that names a request of another session is
// answered 409 (request_owned) before any attempt: the provider would
// bill it and the ledger reject its events (session_conflict). A request
// the ledger knows continues from the highest attempt its record holds,
// so that numbers never repeat after the bucket forgot them; a record
// that does not say is answered 409 (attempts_unknown) rather than risk a
// number. Attempts published but not yet projected are not seen there:
// the bucket's TTL (7 days by default) must outlast the aggregator's lag.
//
// # Labels
//
// A call's labels (the contract's labels: team=search, user=u-42) are the
// gateway's (Config.Labels, gateway run --labels), under the client key's
// (its "labels" in the key file), under the request's X-Ledger-Labels
// (HeaderLabels): a key set in a later one wins. The header holds
// comma-separated key=value pairs, spaces around them ignored, values
// percent-encoded where they hold ',', '=', '%', spaces at either end or
// bytes other than printable ASCII ("team=search, note=caf%C3%A9");
// several header lines count as one list (api.ParseLabels). Every
// attempt's event carries the merged labels. A header that does not
// parse, a label that breaks a rule of the contract, a key given twice,
// or more than 16 pairs once merged is answered 400 (bad_request) before
// any attempt, the body naming the header, the key and the rule, and
// logged at WARN (reason bad_labels). The header never goes upstream.
//
// # Client keys
//
// With Config.Keys (gateway run --keys FILE, ParseKeys) every request,
// accounted or not, must present a client key, else it is answered 401
// (unauthenticated) and logged at WARN (at most once a second per
// reason, never the key). A client key starts with "lk-" (NewKey makes
// one; the file holds only its SHA-256) and is presented where the
// provider's SDK puts its API key, so an unmodified SDK works:
// Authorization: Bearer lk-... (OpenAI), x-api-key: lk-... (Anthropic),
// x-goog-api-key: lk-... or ?key=lk-... (Gemini): any provider's
// credential header or query parameter (Upstream.CredentialHeaders,
// CredentialQuery); or in X-Ledger-Key, when
// the client sends its own provider key in the provider's header. The
// client key never goes upstream. A key names the client; it may fix the
// session (session) or require a prefix of it (session_prefix), and
// answers 403 (session_forbidden) to a session it does not allow; it may
// hold a credential per provider, which the gateway sends upstream in
// place of the client's, so clients never see them (as LiteLLM's and
// Bifrost's virtual keys do); it may carry labels (see Labels).
//
// # Accounts
//
// The breaker of an upstream (provider and model) is shared by every
// client: a provider-wide outage opens it for all. Its rate limits, the
// holds after a 429 and the retry budget are kept per account
// (retry.Call.Account): the key's account when it names one, else a
// digest of the credential that goes upstream ("cred-" and 16 base32
// characters of a SHA-256), so that one tenant's 429 holds only its own
// calls, on every replica. Past 4,096 accounts the others share one.
//
// # One retry layer
//
// Each call is one retry.Do: the breaker of the call's provider and model
// is asked before every attempt, failures are classified by the
// provider's own rules (the same functions that classify its Go SDK's
// errors, applied to the raw response), and retryable ones before the
// first byte reaches the client are retried under the policy. After the
// last attempt the client gets the provider's own status, headers and
// body. A call the breaker refuses is answered 503 with retry-after (and
// retry-after-ms) set to when the breaker will admit a probe; one the
// upstream's rate limits cannot admit in time (the fleet's hold after a
// 429, or a wait past the hint cap) is answered 429 with retry-after, as
// the provider would. Errors the
// gateway makes itself (breaker open, upstream unreachable or silent,
// bodies over the limits) are in the provider's error format and carry
// X-Ledger-Gateway-Error. Clients should not retry on their own
// (max_retries=0, P30): each of their retries is a request the gateway
// retries again.
//
// # Streams
//
// A server-sent event stream goes to the client event by event, flushed
// after each, never buffered whole. Usage is read from the stream itself,
// by the provider's accountant (Provider.NewStream): Anthropic's
// message_start (input and cache) and message_delta (cumulative output);
// the last chunk of an OpenAI chat stream (the provider's Inspect adds
// stream_options.include_usage when the client did not ask, and then the
// gateway does not forward that chunk); response.completed of the
// Responses API; Gemini's usageMetadata, a running total in every chunk.
// Until the first event reaches the client a failure is retried (an
// error event that comes first is kept to relay, should the attempt be
// the last); after it the call ends with that attempt: a stream broken
// upstream is cut for the client too, and its final event records what
// the stream had reported. What a broken stream billed beyond that is not
// knowable from it (each provider's documentation says what its streams
// leave out: an OpenAI stream's input, the output an Anthropic stream
// generated after its last usage report; Gemini's running totals leave
// nothing out). An OpenAI stream whose usage never came records its
// input estimated from the request (estimated_input_tokens, never in the
// usage); at most Limits.MaxEstimates estimates run at once, and one past
// the cap is skipped (counted and logged, never waited for).
//
// # Cost
//
// With Config.Prices every answer carries the answered attempt's cost
// (HeaderCost, X-Ledger-Cost: US dollars, or "unpriced"): a header when
// the answer is not streamed; a stream announces it as a trailer and
// sends it after its last event, priced from the usage the stream
// reported (an estimated input is never priced). A stream cut upstream is
// cut for the client too, without the trailer.
//
// # Credentials
//
// Without keys, the client's credential headers and query parameters
// (every provider's Upstream.CredentialHeaders and CredentialQuery:
// Authorization, x-api-key, x-goog-api-key, ?key=) go upstream as
// received; with them, as the key says (see Client keys): the key's
// credential for the call's provider replaces them all, in that
// provider's first credential header. The
// gateway never logs a header, and redacts every credential of the
// request from the messages of its events and logs. The ledger's own
// headers reach the upstream only with Config.ForwardLedgerHeaders (for
// the fake provider's truth).
//
// # Limits
//
// One client cannot stop the gateway (Config.Limits, package netlimit).
// A request's body is read against a byte budget shared by every call
// (MaxBodyBytesInFlight), chunk by chunk as it arrives and charged for
// the memory it holds, never for its declared Content-Length: a call the
// budget cannot cover gets 503 with retry-after. A body must arrive
// within BodyTimeout plus a second per MinBodyRate bytes (408 beyond);
// each write to the client has WriteTimeout of its own, so a client that
// stops reading is cut and a long stream is not. A client's requests in
// flight are capped (MaxCallsPerClient, 429 with retry-after); the
// client is named by ClientID, by default a digest of its credential.
// Every refusal is counted by reason and logged at WARN, at most once a
// second per reason (Stats, Refusals). The connections are capped by the
// server's listener, netlimit.Listener, which shares the Refusals.
//
// # Telemetry
//
// With Retry.TracerProvider or MeterProvider set, each call's context
// names its GenAI operation for the middleware's spans and metrics
// (telemetry.go: "chat" for messages, chat completions and responses,
// "embeddings", Gemini's "generate_content"), and a client's W3C
// traceparent makes the call's span a child of the client's. The
// traceparent still goes upstream as the client sent it.
//
// The Gateway is an http.Handler; it starts no goroutines. The
// connections to the upstreams are its Transport's.
package gateway
