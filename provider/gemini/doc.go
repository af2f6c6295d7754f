// Package gemini adapts the Google Gen AI Go SDK (google.golang.org/genai)
// to the ledger's retry middleware: the classification of the SDK's
// errors (Classifier), the usage of a response or of a stream that failed
// midway (UsageOf, MetadataUsage, StreamUsage), the client and request
// configuration that turns the SDK's own extra requests off (ClientConfig,
// GenerateContentConfig, NoRetries), and the response's id (ResponseID).
//
// genai sends extra requests of its own in two ways, both of which must be
// off under the middleware, since each is a billed attempt the ledger
// never sees: HTTP retries (ClientConfig and NoRetries turn them off) and
// automatic continuation, a per-request setting on by default
// (GenerateContentConfig turns it off).
//
// Classify recognises a genai.APIError (an HTTP error response, or an
// error object inside a stream; the retry hint comes from its RetryInfo
// detail) and leaves transport errors, the attempt's timeout and the
// caller's cancellation to the middleware.
//
// Importing the package makes every ledger middleware classify the
// SDK's errors by default (without WithClassifiers): the provider
// registers itself, once, when the package is initialised.
package gemini
