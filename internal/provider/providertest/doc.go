// Package providertest owns what the providers' tests share: the
// conformance suite every provider runs, the fault server the SDK
// adapters test against, and the classification checks.
//
// # The conformance suite
//
// Run(t, p, features) runs one subtest per scenario against a
// provider.Provider, after watermill's pubsub/tests: the provider's test is
// its Features (its tables and samples), and a scenario whose part the
// provider lacks (rate-limit headers, error events in a stream, broken
// streams, an SDK) is skipped with the reason. The scenarios cover the
// Upstream, the routes (Match), the requests (Inspect), the usage of
// whole bodies, of complete streams and of streams cut short, error
// events in a stream, the classification of raw error responses and of
// the SDK's errors for the same responses, the SDK's transport faults and
// timeouts, the error bodies the gateway makes (ErrorBody) and the
// rate-limit headers. Beside the tables, every provider meets the generic
// invariants: Match takes no odd path nor an accounted path with more
// before or after it; Inspect never panics, never writes to its input,
// returns a body that is not JSON as it is, changes a body only to add
// the usage option, and then names no member twice; BodyUsage and the
// stream's accountant never panic and never report a negative count or
// an ID that does not fit the contract, whatever the data (the provider's
// own samples cut short, with every number negated or huge, and garbage);
// ClassifyResponse never panics for any status from 100 to 599 and, for
// an error status whose body it cannot read, follows the contract's
// status rule (retry.StatusKind) and keeps the body out of the message;
// ClassifyStreamError gives a valid kind and a status that is 0 or an
// HTTP status; ErrorBody is JSON for every error status and
// ClassifyResponse reads its status back, a 429 and a 500, 502, 503 or
// 504 retried, a 400 not; the classifier claims no transport error.
//
// The one rule the suite cannot check is that a GET is never accounted:
// Match takes a path, and the method is the gateway's to check.
//
// # Adding a provider's test
//
// A provider with its own API adds internal/provider/NAME/
// conformance_test.go:
//
//	func TestConformance(t *testing.T) {
//		providertest.Run(t, New(), providertest.Features{
//			Name:   "acme",
//			Routes: []providertest.RouteCase{{Path: "/v1/complete", Want: provider.Route{Endpoint: "complete"}}},
//			// Requests, Bodies, Streams (with Cuts), StreamErrors, Responses,
//			// ErrorBodies, RateLimits, SDK: see Features.
//		})
//	}
//
// The tables of one API live in one place: a provider's other tests read
// them from its Features rather than repeat them.
//
// An OpenAI-compatible provider (a preset or an --upstream, built on
// openai.New) runs the tables of OpenAI's dialect, which live in
// internal/provider/openai/openaitest so that any package's test can
// take them, and changes what differs:
//
//	f := openaitest.Features("mistral", "X-Kong-Request-Id") // its name, its request ID header
//	f = openaitest.Without(f, "/v1/embeddings")             // an endpoint it does not account
//	f = openaitest.UsageUnasked(f)                          // no stream_options: the usage comes unasked
//	f.RateLimits = ...                                      // its own headers (nil: it sends none)
//	f.Responses = append(f.Responses, ...)                  // the error bodies it classifies otherwise
//	f.SDK = openaitest.SDK(clientOptions...)                // the openai-go client pointed at it
//	providertest.Run(t, p, f)
//
// It is for tests only.
package providertest
