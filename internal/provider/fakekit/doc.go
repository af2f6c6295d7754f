// Package fakekit owns the seam between the fake provider (package
// internal/sim/fakeprovider) and the providers' fake dialects: what a
// provider folder declares to be spoken by the fake provider, and the
// primitives its dialect is written with.
//
// A provider folder builds a Dialect (fake.go): the provider's name, the
// path prefix it is served under, its endpoints, its organization's rate
// limits and their headers, whether it bills cache writes, what its
// answers report beside the four counts (a reasoning part of the output,
// a 1-hour part of the cache write, a service tier: Subsets and
// ServiceTierFor, functions of the request ID alone), and the SDK client
// the simulator drives against it (Sim). Its Provider offers the
// dialect by implementing Faker; the fake provider, the simulator,
// ledgertest and the bench find dialects through the provider registry
// and never name a provider.
//
// An endpoint's handler decodes and checks the request in the API's own
// format, then hands the attempt to the fake provider (Server.Serve) with
// a Reply: the fake provider decides the attempt (a fault or a success)
// from its seed or its script, books it in its ground truth, and answers
// through the Reply, which writes the provider's own bodies, streams,
// errors and headers. The kit gives the rest: the call's identity (Call),
// faults and decisions, JSON and server-sent events writers, the
// provider's request ID of an attempt, the tier's limit state and the
// rate-limit headers written from the names the provider's guards read
// (LimitHeadersOf).
//
// It is the fake world only: nothing here is linked into the gateway's
// request path.
package fakekit
