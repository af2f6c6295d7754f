// Package anthropic adapts the Anthropic Go SDK
// (github.com/anthropics/anthropic-sdk-go/v2) to the ledger: it owns the
// classification of the SDK's errors into retry.Classification, the
// extraction of the wire contract's usage from the SDK's Usage (including
// the usage of a stream that failed midway), the client options that turn
// the SDK's own retries off, and the provider's request-id header. wire.go
// applies the same rules to raw HTTP responses and stream events, for the
// gateway.
//
// The retry middleware is the single authoritative retry layer, so every
// client used under it must be built with ClientOptions: the SDK otherwise
// retries twice on its own, and each hidden retry is a billed attempt the
// ledger never sees.
//
// How the SDK reports failures (v2.17.0), which Classify relies on:
//
//   - An HTTP error response is a *anthropic.Error (errors.As) with
//     StatusCode, the response and its headers, RequestID (the request-id
//     header), Message (error.message) and Type() (error.type). A body that
//     is not JSON still gives a *anthropic.Error, with empty Message and
//     Type.
//   - An error event inside a stream is a *anthropic.Error too, but with the
//     stream's own status, 200: only Type() says what happened.
//   - Transport failures are returned as the SDK got them, not wrapped in
//     its own type: *url.Error from net/http for a refused or reset
//     connection, "error reading response body: %w" around the read error
//     (io.ErrUnexpectedEOF, ECONNRESET) for a response cut off midway.
//   - When the context passed to the call is done, or the SDK's own
//     per-attempt timeout (option.WithRequestTimeout) expires, the call
//     returns the bare context error (context.DeadlineExceeded or
//     context.Canceled).
//
// Classify returns ok false for all but the first two, so that the
// middleware's chain falls through to retry.ClassifyTransport, which
// recognises every one of them.
//
// provider.go is the provider the gateway and the guards ask
// (provider.Provider), registered as "anthropic" when the package is
// initialised (with its classifier and rate-limit headers: the one
// registration): the accounted path POST /v1/messages, what its clients
// alone send (anthropic-version, x-api-key, /v1/messages/...), the
// credential headers (x-api-key, Authorization), the stream accountant
// (message_start carries the input and cache, message_delta the
// cumulative output, message_stop ends the stream; a broken stream cannot
// tell the output generated after its last usage report), the error body
// ({"type":"error","error":{"type","message"}}) and the
// anthropic-ratelimit-{requests,input-tokens,output-tokens}-* headers.
//
// fake.go is the API's fake dialect (FakeDialect), which the fake provider
// of the simulator and ledgertest speaks, and fake_caller.go the SDK
// client the simulator drives against it.
package anthropic
