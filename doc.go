// Package ledger is what a Go agent imports to join the usage ledger: it
// connects to NATS, runs every model call through a retry middleware that
// records one event per attempt, and publishes those events to the
// ledger's stream, where the aggregator projects them into usage (what the
// logical calls used: the winning attempt) and billed (what the provider
// charged: every attempt).
//
// An agent wires it in a few lines:
//
//	conn, err := ledger.Connect(ctx, ledger.WithEnv()) // NATS_URL, NATS_CREDS, NATS_CA, ...
//	if err != nil {
//		return err // a *ConnectError: which server refused, and why
//	}
//	defer conn.Close()
//	pub, err := ledger.NewPublisher(ctx, conn.JetStream())
//	if err != nil {
//		return err
//	}
//	defer pub.Close(ctx) // drains; reports undelivered events
//	mw, err := ledger.NewMiddleware(pub) // classifies the errors of the SDKs whose adapter is imported
//	if err != nil {
//		return err
//	}
//	msg, err := ledger.Do(ctx, mw, ledger.Call{SessionID: "sess-1", Provider: anthropic.Name, Model: "claude-sonnet-4-5"},
//		func(ctx context.Context, a ledger.Attempt) (*sdk.Message, ledger.Report, error) { ... })
//
// with the provider adapters of github.com/agentledger/ledger/provider/...
// (classification, usage, and client options that turn the SDK's own
// retries off). The whole agent, every error handled, is examples/agent in
// the repository (the README's snippet). Tests in other modules use
// github.com/agentledger/ledger/ledgertest, an embedded server with the
// ledger and an aggregator in process; github.com/agentledger/ledger/metrics
// exposes the publisher's and the middleware's counters to Prometheus.
//
// # Concepts
//
//   - Connect (connect.go): the nats CLI's settings (URL, creds file, NKEY
//     seed, TLS CA and client certificate, saved contexts, their
//     environment variables). A refused connection is a *ConnectError that
//     names the server, what was offered and what was refused; reconnects
//     are unlimited, with backoff, each one logged. WithInboxPrefix gives
//     the connection the reply subjects of its NATS role (docs/security.md).
//   - Publisher (publisher.go): the asynchronous publisher of attempt
//     events. Publish never waits on the network; Flush waits for the acks;
//     Close drains and says how many events were undelivered. It creates
//     the stream only when asked (WithCreateStream), and then warns when
//     the stream that exists differs from what was asked. WithOutbox keeps
//     the events on disk until they are acknowledged, so that a process
//     killed during a NATS outage loses none: the next publisher on the
//     directory delivers them, exactly once.
//   - Middleware and Do (middleware.go): the retry middleware. Each
//     logical call (Call) gets a stable request_id shared by its attempts;
//     each attempt is classified (Classifier), retried under a Policy with
//     backoff, jitter and the server's Retry-After hints, guarded by a
//     circuit breaker per upstream, and recorded as one event. The
//     default policy bounds each attempt (10 min until its answer or a
//     stream's first byte, 5 min of a stream's silence; Progress), the
//     errors of the SDKs whose adapter is imported are classified without
//     options, a call to a provider no classifier is for fails
//     (ErrNoClassifier), and an SDK that retries on its own is logged once
//     at WARN.
//     DoResult (result.go) is Do that also returns the call's request_id
//     and its number of attempts.
//   - Telemetry (telemetry.go): the middleware's OpenTelemetry, after the
//     GenAI semantic conventions of v1.41.0 (SemconvVersion): a span per
//     call and one per attempt, the gen_ai.client.token.usage and
//     gen_ai.client.operation.duration histograms, through the providers
//     of WithTracerProvider and WithMeterProvider (default otel's global
//     ones, no-ops unless the program set them); WithOperation names a
//     call's operation. docs/telemetry.md lists the attributes.
//   - Labels (labels.go): a call's attribution (team=search, user=u-42),
//     set as defaults on the middleware (WithLabels) and on each Call
//     (Call.Labels, a key of the Call's winning); every attempt's event
//     carries them, and the ledger keeps a request's in its record and its
//     rollups. Labels that break the contract's rules fail the call before
//     any attempt with an error that matches *LabelError, naming the key
//     and the rule.
//
// Every option validates its argument: New* and Connect return an error
// wrapping ErrInvalidOption that names the option and the rule.
//
// # Types shared with the ledger
//
// Call, Attempt, Report, Usage, Classification, Classifier,
// ClassifierFunc, ErrorKind, Policy, StopReason, MiddlewareStats,
// PublisherStats, ConnectError, UndeliveredError, Labels and LabelError
// (and the constants
// and sentinel errors that go with them) are aliases of those of the same
// name in github.com/agentledger/ledger/api, which the ledger's own
// middleware, publisher, connection and provider adapters use too: one
// type each, never a conversion. Use them by their names here; go doc on
// the api package shows their fields and methods (Usage.Add,
// Policy.Validate, UndeliveredError.AllKept, ...).
package ledger
