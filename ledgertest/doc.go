// Package ledgertest is the ledger's test kit for other modules: an
// embedded JetStream server with the ledger's stream and an aggregator in
// process (Start), a wait until the ledger has applied every event
// (Ledger.WaitCaughtUp) or until one request's record is final
// (Ledger.WaitRequest), typed reads of request and session records that
// fail the test when the record is absent (Ledger.Request,
// Ledger.Session) or report it (Ledger.LookupRequest,
// Ledger.LookupSession: a record, and whether there is one), and fake
// upstreams that answer the official SDKs with a script of steps
// (FakeUpstream for any built-in provider by name; FakeAnthropic,
// FakeOpenAI, FakeGemini): success, rate limit, overload, server error,
// bad request, a failure after the provider billed the input, or a
// stream cut before its end (CutStream: an OpenAI stream cut before its
// usage chunk, whose input the ledger records as estimated, in
// Request.EstimatedInputTokens, apart from Usage and Billed).
// StartGateway serves the ledger's gateway (package gateway) on a
// loopback port, publishing to the test's ledger, for clients that reach
// the ledger through it; GatewayUpstream puts a fake upstream behind it.
//
// Everything it starts is stopped with t.Cleanup, and each server listens
// on a random loopback port with its store in the test's temp dir, so
// tests run in parallel.
//
// A billed failed attempt followed by a success (the case a summing
// aggregator counts twice) looks like this:
//
//	l := ledgertest.Start(t)
//	up := ledgertest.FakeAnthropic(t,
//		ledgertest.FailAfterBilling(ledger.Usage{InputTokens: 500}),
//		ledgertest.Succeed(ledger.Usage{InputTokens: 500, OutputTokens: 1200}))
//	// ... the agent's code calls up.URL() through ledger.DoResult, publishing with l.Publisher(t) ...
//	r := l.WaitRequest(t, res.RequestID) // r.Usage: 500 in, 1200 out; r.Billed: 1000 in, 1200 out
//
// A record that is not there fails Request and Session with what is
// missing: nothing written to the ledger yet (its buckets do not exist
// until the aggregator first runs), or no record for that ID.
package ledgertest
