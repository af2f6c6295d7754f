// Package guard owns what the retry middleware asks about an upstream
// around each attempt, besides the retry policy: its circuit breaker, its
// rate limits, and its retry budget. A Set holds one Guard per upstream
// key (provider/model by default, or a wider scope a caller names), and
// one per account of an upstream (AccountKey: upstream@account), whose
// rate limits, holds and retry budget the middleware uses for a call with
// an account while it asks the upstream's guard for the breaker.
//
//   - Breaker: the upstream's circuit breaker (package breaker).
//   - Rate limits: requests, input tokens and output tokens per minute
//     (and OpenAI's one tokens limit, input plus output), configured or
//     learned from the providers' rate-limit headers (each provider
//     declares its own with RateLimitHeaders, the generic parsing is
//     here; Outcome.RateLimits reads them), kept as token buckets
//     (package tokenbucket). Before an attempt, Reserve takes its
//     estimated cost (Estimate: the mean of the actual costs
//     plus twice their deviation, the rest given back when the attempt
//     settles) or says how long until it fits; a 429 with
//     a hint holds the upstream until then. A 429 gives nothing back (the
//     reservation is spent, the buckets are empty as of it: the caller
//     was ahead of the provider), and an upstream with no limit learned
//     or configured gets one inferred from its 429s (Inferred). Waiting is
//     the caller's business (the middleware sleeps on its clock); it is
//     not an attempt.
//   - Retry budget (Envoy and gRPC style): retries are allowed while they
//     stay within Ratio of the first attempts of the last Window, plus a
//     floor of Min retries. With rate limits on, a retry after a 429 is
//     not the budget's (PacesRateLimits): the hold paces it.
//
// # Local and shared state
//
// Each Guard keeps local state. A Set may also have a Shared backend (the
// fleet's state on NATS, package fleet): while it is healthy, the shared
// backend decides (one breaker, one capacity and one budget for every
// process of the fleet) and the local state is kept warm alongside; when
// it is not (unreachable, slow, or a decision it could not take within its
// short wait), the Guard decides locally, with each rate limit divided by
// the number of processes the backend last saw alive. The backend logs the
// change of mode; the Guard never logs.
//
// Time comes from Config.Now; the package starts no goroutines.
package guard
