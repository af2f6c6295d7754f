// Package anthropic adapts the Anthropic Go SDK
// (github.com/anthropics/anthropic-sdk-go/v2) to the ledger's retry
// middleware: the classification of the SDK's errors (Classifier), the
// usage of a message or of a stream that failed midway (UsageOf,
// StreamUsage), the client options that turn the SDK's own retries off
// (ClientOptions), and the provider's request id (RequestID).
//
// The middleware is the single authoritative retry layer, so every client
// used under it must be built with ClientOptions: the SDK otherwise
// retries twice on its own, and each hidden retry is a billed attempt the
// ledger never sees.
//
// Classify recognises a *anthropic.Error (an HTTP error response, or an
// error event inside a stream) and leaves everything else (a refused or
// reset connection, a response cut off, the attempt's timeout, the
// caller's cancellation) to the middleware, which classifies transport
// errors itself. An account out of credit or over a spend limit is never
// retried, whatever the status says.
//
// Importing the package makes every ledger middleware classify the
// SDK's errors by default (without WithClassifiers): the provider
// registers itself, once, when the package is initialised.
package anthropic
