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
// the SDK's errors for the same responses, the SDK's transport faults, the
// error bodies the gateway makes (ErrorBody) and the rate-limit headers.
// Beside the tables, every provider meets the generic invariants: Match
// takes no odd path nor an accounted path with more before or after it;
// Inspect never panics, never writes to its input and returns a body that
// is not JSON as it is; BodyUsage and the stream's accountant never panic
// and never report a negative count, whatever the data (the provider's
// own samples cut short, with every number negated or huge, and garbage);
// ClassifyResponse never panics for any status from 100 to 599 and, for
// an error status whose body it cannot read, follows the contract's
// status rule (retry.StatusKind); ErrorBody is JSON for every error status
// and ClassifyResponse reads its status back, a 429 and a 5xx of 500, 502,
// 503, 504 retried, a 400 not; the classifier claims no transport error.
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
// An OpenAI-compatible provider (a preset or a --upstream) shares
// OpenAI's wire format, so it runs OpenAI's Features with its own name,
// origin and differences: the openai package's test exports nothing, so
// the compatible providers' tests build on openai's feature function (see
// internal/provider/openai's conformance_test.go) and change Name, the
// rate-limit headers their upstream sends and the error codes that
// differ.
//
// It is for tests only.
package providertest
