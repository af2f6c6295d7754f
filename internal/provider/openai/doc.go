// Package openai adapts the OpenAI Go SDK (github.com/openai/openai-go/v3)
// to the ledger: it owns the classification of the SDK's errors into
// retry.Classification, the extraction of the wire contract's usage from
// the SDK's usage types (Chat Completions and Responses) and from streams
// (StreamUsage, ResponseStreamUsage: a stream that breaks before its usage
// still reports the output it streamed), the client options that turn the
// SDK's own retries off, and the provider's request-id header
// (x-request-id). wire.go applies the same rules to raw HTTP responses and
// stream events, for the gateway.
//
// The retry middleware is the single authoritative retry layer, so every
// client used under it must be built with ClientOptions: the SDK otherwise
// retries twice on its own, and each hidden retry is a billed attempt the
// ledger never sees.
//
// How the SDK reports failures (v3.102.0), which Classify relies on:
//
//   - An HTTP error response is a *openai.Error (errors.As) with
//     StatusCode, the response and its headers, and the fields of the
//     body's "error" object: Code, Type, Message, Param. A body that is
//     not JSON, or has no "error" object, still gives a *openai.Error, with
//     those fields empty. The error carries no request id of its own; it is
//     read from the response's x-request-id header.
//   - An error object inside a stream is a *ssestream.StreamError with the
//     event's data; Classify decodes its "error" object.
//   - Transport failures are returned as the SDK got them, not wrapped in
//     its own type: *url.Error from net/http for a refused or reset
//     connection or an http.Client timeout; "error reading response body:
//     %w" around the read error (io.ErrUnexpectedEOF) for a success
//     response cut off midway, and the bare read error for an error
//     response cut off midway or a stream that breaks off.
//   - When the attempt's context is done, or the SDK's own per-attempt
//     timeout (option.WithRequestTimeout) expires, the call returns the
//     bare context error.
//
// The OpenAI-compatible APIs (Mistral, Groq, DeepSeek, Together,
// OpenRouter, vLLM, Ollama, or any other at a URL) are providers of
// OpenAI's dialect under a name of their own (Compatible, compat.go):
// presets.go holds what each API's documentation says differs from
// OpenAI (origin, endpoints, rate-limit headers, error rules, usage in
// streams), compaterr.go reads their error bodies, whatever the shape,
// and classifies them. Their SDK clients are built with
// CompatClientOptions, which names the provider on each response so that
// Classify applies its rules.
//
// Classify returns ok false for all but the first two, so that the
// middleware's chain falls through to retry.ClassifyTransport, which
// recognises every one of them.
//
// provider.go is the provider the gateway and the guards ask
// (provider.Provider): Default, OpenAI's own API, registered as "openai"
// when the package is initialised (with its classifier and rate-limit
// headers: the one registration), and New, the same dialect under
// another name, origin and rate-limit headers, for the OpenAI-compatible
// upstreams. The dialect is: the accounted paths POST
// /v1/chat/completions, /v1/responses and /v1/embeddings; the credential
// in Authorization as a bearer token; a chat stream made to report its
// usage (stream_options.include_usage added when the client did not ask,
// and its usage chunk then not forwarded); the stream accountants (a
// chat stream's usage in its last chunk, the content chunks counted
// before it, so a broken one cannot tell its input, which is then
// estimated; response.completed of the Responses API); the error body ({"error":{"message","type",
// "param","code"}}); and the x-ratelimit-{limit,remaining,reset}-
// {requests,tokens} headers. At the gateway's root OpenAI takes the
// unaccounted requests under /v1/ that Anthropic's and Gemini's hints do
// not claim.
//
// estimate.go estimates the input of a chat or Responses request with the
// model family's tokenizer (github.com/tiktoken-go/tokenizer, whose
// vocabularies are embedded: it works offline) by the rules of OpenAI's
// cookbook (EstimateInput). The gateway's stream accountants
// (provider.InputEstimator) and the public adapter's StreamUsage use it
// when a stream's usage never came: the estimate is recorded apart from
// the usage, in the attempt's estimated_input_tokens. Images, audio,
// files and built-in tools are not estimated; text past
// MaxEstimateBytes is counted at the rate of the text before it.
//
// fake*.go are the APIs' fake dialect (FakeDialect: chat completions,
// responses, embeddings), which the fake provider of the simulator and
// ledgertest speaks, made for OpenAI (OpenAIFakeDialect) or for an
// OpenAI-compatible provider with its differences (FakeOptions: prefix,
// rate-limit headers, error body, limits); fake_caller.go is the SDK
// client the simulator drives against it.
package openai
