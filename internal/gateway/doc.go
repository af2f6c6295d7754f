// Package gateway owns the ledger's HTTP gateway: a proxy that speaks the
// providers' own APIs, so that an agent in any language reaches the ledger
// by changing its SDK's base URL alone, and that runs every model call
// through the retry middleware (internal/retry) and its circuit breakers,
// publishing one attempt event per attempt, accounted to the token, with
// streams relayed event by event.
//
// # Routes
//
// Accounted, at the providers' own paths (the path and query go upstream
// as received, to the provider's origin in Config.Upstreams):
//
//	POST /v1/messages                                       Anthropic
//	POST /v1/chat/completions, /v1/responses, /v1/embeddings OpenAI
//	POST /v1beta/models/{model}:generateContent              Gemini
//	POST /v1beta/models/{model}:streamGenerateContent        (v1 and v1alpha too)
//
// Anything else is proxied through unchanged and not accounted (the log
// says so once per path); its upstream is picked by what only one
// provider's clients send (Gemini's paths and key, Anthropic's version
// header and key; OpenAI otherwise).
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
// # Client keys
//
// With Config.Keys (gateway run --keys FILE, ParseKeys) every request,
// accounted or not, must present a client key, else it is answered 401
// (unauthenticated) and logged at WARN (at most once a second per
// reason, never the key). A client key starts with "lk-" (NewKey makes
// one; the file holds only its SHA-256) and is presented where the
// provider's SDK puts its API key, so an unmodified SDK works:
// Authorization: Bearer lk-... (OpenAI), x-api-key: lk-... (Anthropic),
// x-goog-api-key: lk-... or ?key=lk-... (Gemini); or in X-Ledger-Key, when
// the client sends its own provider key in the provider's header. The
// client key never goes upstream. A key names the client; it may fix the
// session (session) or require a prefix of it (session_prefix), and
// answers 403 (session_forbidden) to a session it does not allow; it may
// hold a credential per provider, which the gateway sends upstream in
// place of the client's, so clients never see them (as LiteLLM's and
// Bifrost's virtual keys do); its labels are read and kept, not yet
// applied (the contract has no labels yet).
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
// after each, never buffered whole. Usage is read from the stream itself:
// Anthropic's message_start (input and cache) and message_delta
// (cumulative output); the last chunk of an OpenAI chat stream (the
// gateway adds stream_options.include_usage when the client did not ask,
// and then does not forward that chunk); response.completed of the
// Responses API; Gemini's usageMetadata, a running total in every chunk.
// Until the first event reaches the client a failure is retried (an
// error event that comes first is kept to relay, should the attempt be
// the last); after it the call ends with that attempt: a stream broken
// upstream is cut for the client too, and its final event records what
// the stream had reported. What a broken stream billed beyond that is not
// knowable from it: an OpenAI stream's input (and, if a chunk carried
// several tokens, part of its output; the gateway counts one per content
// chunk), the output an Anthropic stream generated after its last usage
// report. Gemini's running totals leave nothing out.
//
// # Credentials
//
// Without keys, the client's credential headers (Authorization,
// x-api-key, x-goog-api-key) and a key query parameter go upstream as
// received; with them, as the key says (see Client keys). The
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
// The Gateway is an http.Handler; it starts no goroutines. The
// connections to the upstreams are its Transport's.
package gateway
