// Package gateway is the ledger's HTTP gateway as a library: the same
// proxy cmd/gateway runs, as an http.Handler built from options, for a
// program or a test in another module that embeds it instead of starting
// the command.
//
// The gateway speaks the providers' own APIs, so that an agent in any
// language reaches the ledger by changing its SDK's base URL alone:
// Anthropic http://ADDR, OpenAI http://ADDR/v1, Gemini http://ADDR (each
// provider is also served under its name: http://ADDR/openai/v1). Every
// model call runs through the retry middleware and its circuit breakers,
// and each attempt is published as one event, accounted to the token,
// streams relayed event by event. The session is the header
// X-Ledger-Session-Id, the request X-Ledger-Request-Id (else
// Idempotency-Key, else a new ULID); every answer carries
// X-Ledger-Request-Id. The call's labels are the header X-Ledger-Labels
// ("team=search, user=u-42") over the client key's and the gateway's
// (WithLabels); a bad one is answered 400 naming the header, the key and
// the rule. Clients should set their SDK's own retries to 0: the gateway
// retries.
//
// A gateway is made by New from options, each validated (an error wraps
// ledger.ErrInvalidOption and names the option and the rule):
//
//   - where the events go: WithNATS (a *ledger.Conn: a publisher the
//     gateway owns, and the attempt numbers in the bucket
//     ledger_gateway_attempts shared by replicas), WithNATSURL (the same
//     on a connection the gateway makes), or WithPublisher (a
//     *ledger.Publisher the caller owns);
//   - the upstream origin of each provider by name, with an optional path
//     prefix (WithUpstream; default the provider's public endpoint);
//   - client keys (WithKeysFile, the file of cmd/gateway's --keys) or none
//     (WithInsecureNoAuth to serve beyond loopback without them);
//   - the retry policy (WithRetryPolicy), the limits of one client
//     (WithLimits), the default session, a logger;
//   - OpenTelemetry (WithTracerProvider, WithMeterProvider; default
//     otel's global providers): a GenAI span per call and per attempt,
//     the token and duration histograms (docs/telemetry.md).
//     (WithLimits), the default session, the default labels (WithLabels,
//     under a key's and the request's X-Ledger-Labels), a logger.
//
// *Gateway is an http.Handler: mount it on a server of your own, or call
// Serve, which serves it on a listener with cmd/gateway's hardening
// (connection cap, header, body, write and idle timeouts, refusals logged
// at WARN), logs "gateway: listening" with addr=ADDR once it accepts
// connections, and shuts down gracefully when its context ends. Close
// then drains the events: it returns nil once every event is
// acknowledged, else an error that says how many are undelivered.
//
// What a call records, how streams are accounted, the client keys' rules
// and the limits are cmd/gateway's, documented there and in the README
// ("Agents in any language"). The breakers and rate limits are this
// gateway's own (cmd/gateway shares them with the fleet over NATS).
//
// In a test, ledgertest.StartGateway serves one on a loopback port,
// publishing to the test's ledger, with ledgertest's scripted fake
// upstreams behind it (ledgertest.GatewayUpstream).
package gateway
