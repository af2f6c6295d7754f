// Package gemini adapts the Google Gen AI Go SDK (google.golang.org/genai)
// to the ledger: it owns the classification of the SDK's errors into
// retry.Classification, the extraction of the wire contract's usage from
// the SDK's usage metadata, and the client and request configuration that
// turns the SDK's own extra requests off. wire.go applies the same rules to
// raw HTTP responses and stream chunks, for the gateway.
//
// The retry middleware is the single authoritative retry layer. genai
// sends extra requests of its own in two ways (v1.77.0), and both must be
// off under the middleware, since each is a billed attempt the ledger
// never sees:
//
//   - HTTP retries, when HTTPOptions.RetryOptions is set on the client or
//     the request (default when set: 5 attempts). ClientConfig and
//     NoRetries turn them off explicitly.
//   - Automatic continuation, on by default for GenerateContent and
//     GenerateContentStream: a response that ends with finish reason
//     CONTINUATION is followed by more requests, and a stream that drops
//     after a checkpoint is reconnected up to three times. It is a field of
//     each request's GenerateContentConfig, not of the client:
//     GenerateContentConfig turns it off.
//
// How the SDK reports failures, which Classify relies on:
//
//   - An HTTP error response is a genai.APIError value (errors.As with a
//     genai.APIError target; Classify also accepts a *genai.APIError) with
//     Code (error.code, the HTTP status), Status (error.status, the
//     google.rpc code name such as RESOURCE_EXHAUSTED), Message and Details
//     (RetryInfo, QuotaFailure, ErrorInfo). It carries no response headers:
//     there is no Retry-After (the hint comes from RetryInfo.retryDelay) and
//     no request id. A body that is not JSON gives an APIError whose Status
//     is the HTTP status line and whose Message is the raw body; Classify
//     does not copy that body into the event.
//   - An error object inside a stream is a genai.APIError too.
//   - Transport failures come back wrapped with %w: "doRequest: error
//     sending request: %w" around net/http's *url.Error for a refused or
//     reset connection, an http.Client timeout or the attempt's context
//     deadline (context.DeadlineExceeded inside); the bare read error
//     (io.ErrUnexpectedEOF) for a success response or a stream cut off
//     midway; "newAPIError: error reading response body: %w. Response: %v"
//     (which includes the partial body) for an error response cut off.
//
// Classify returns ok false for all but the first two, so that the
// middleware's chain falls through to retry.ClassifyTransport, which
// recognises every one of them through errors.Is and errors.As.
//
// provider.go is the provider the gateway and the guards ask
// (provider.Provider), registered as "gemini" when the package is
// initialised (with its classifier: the one registration): the accounted
// paths POST /{v1beta,v1,v1alpha}/models/{model}:generateContent and
// :streamGenerateContent (the model and the stream flag are the path's),
// what its clients alone send (those versions' paths, /upload/,
// /download/, x-goog-api-key, the key parameter), the credential in
// x-goog-api-key or ?key=, the stream accountant (usageMetadata is a
// running total in every chunk, so a broken stream leaves nothing out; a
// chunk with a finishReason ends it), the error body ({"error":{"code",
// "message","status"}}). The API sends no rate-limit headers: RateLimits
// is the zero Observed.
//
// fake.go is the API's fake dialect (FakeDialect), which the fake provider
// of the simulator and ledgertest speaks, and fake_caller.go the SDK
// client the simulator drives against it.
package gemini
