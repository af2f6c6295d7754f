// Package openai adapts the OpenAI Go SDK (github.com/openai/openai-go/v3)
// to the ledger's retry middleware: the classification of the SDK's
// errors (Classifier), the usage of Chat Completions and Responses
// (UsageOf, ResponseUsageOf) and of their streams, broken ones included
// (StreamUsage, ResponseStreamUsage; made with NewStreamUsage or
// NewResponseStreamUsage they estimate the input of a stream cut before
// its usage, from the request, with the model family's tokenizer, and
// Report carries it apart in EstimatedInputTokens; EstimateInput and
// EstimateResponseInput give the estimate of a request), the client options that turn the SDK's own
// retries off (ClientOptions), and the provider's request id (RequestID,
// from the x-request-id header).
//
// The middleware is the single authoritative retry layer, so every client
// used under it must be built with ClientOptions: the SDK otherwise
// retries twice on its own (honouring Retry-After up to 2 minutes), and
// each hidden retry is a billed attempt the ledger never sees.
//
// An OpenAI-compatible API (Mistral, Groq, DeepSeek, Together,
// OpenRouter, vLLM, Ollama, or any other in OpenAI's dialect) is an
// Upstream of its own name (Compatible): point the client at it with the
// Upstream's ClientOptions and record its calls as ledger.Call{Provider:
// up.Name()}; its errors are classified by the API's own rules (its error
// bodies, its 429s that are overloads, its quota statuses).
//
// Classify recognises a *openai.Error (an HTTP error response) and an
// error object inside a stream; it leaves transport errors, the attempt's
// timeout and the caller's cancellation to the middleware.
//
// Importing the package makes every ledger middleware classify the
// SDK's errors by default (without WithClassifiers): the provider
// registers itself, once, when the package is initialised.
package openai
