// Package fakeprovider owns the simulator's stand-in for the model APIs: an
// in-process HTTP server on the loopback interface that speaks each
// provider's API well enough for the real SDK clients, pointed at it by
// base URL, to work unchanged. It names no provider: the APIs are the
// fake dialects of the providers (package fakekit), each written in its
// provider's folder and found through the provider registry (a Provider
// that implements fakekit.Faker; Dialects), or given in Options.Dialects
// (an OpenAI-compatible provider made at run time). The built-in ones
// speak the Anthropic Messages API, the OpenAI Chat Completions,
// Responses and Embeddings APIs and the Gemini generateContent API, each
// streaming where the API does. New serves each provider under its
// dialect's prefix (BaseURL); Listen (the `publisher fakeprovider`
// command) also serves the APIs' own paths, so that a gateway can use it
// as every provider's origin.
//
// The server owns what every dialect shares: the ledger headers that
// identify a request, the decision of each attempt, the truth, the tier's
// token buckets and the outage, stalls and cut connections. A dialect
// owns its paths, its request checks, its bodies, streams and errors, its
// rate-limit headers and its organization's limits.
//
// Every request names its logical call and attempt in the headers
// HeaderSessionID, HeaderRequestID and HeaderAttempt. From those and a seed
// the server decides, deterministically, the call's token counts and whether
// the attempt succeeds or fails with an injected fault: a rate limit with a
// short retry-after, an overload, a server error, a permanent bad request,
// or a timeout after the input was billed (a stream that starts, reports the
// input usage, and stalls until the client gives up), or a broken stream (a
// stream that streams a few tokens and is cut off).
//
// The server keeps the ground truth of what it charged (Truth): per session
// and in total, the tokens billed over every attempt it served, including
// the billed failed ones, and the usage of each logical call (its successful
// attempt), with counts of requests, attempts and outcomes. The ledger's
// figures are checked against it. Of what a failed stream billed, the truth
// also says how much no client could have learned from the answer
// (Unobservable: an OpenAI stream's input before its usage chunk, the
// output an Anthropic stream generated after its last usage report), so
// that a ledger can be checked to the token against what is knowable.
package fakeprovider
