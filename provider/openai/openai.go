package openai

import (
	"net/http"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentledger/ledger"
	impl "github.com/agentledger/ledger/internal/provider/openai"
)

// Name is the provider of the calls made with this SDK, for ledger.Call.
const Name = "openai"

// RequestIDHeader is the response header in which OpenAI names the
// request.
const RequestIDHeader = "x-request-id"

// Classifier classifies the errors of the OpenAI SDK, for
// ledger.WithClassifiers, named for Name. The middleware classifies this
// SDK's errors without it (this package registers them when imported); it
// is for a chain of one's own. It is safe for
// concurrent use.
var Classifier = ledger.ClassifierFor(Name, ledger.ClassifierFunc(Classify))

// Classify classifies a *openai.Error (by its status, x-should-retry and
// Retry-After headers; a 429 without Retry-After takes its hint from the
// x-ratelimit-reset-* header of the exhausted limit; an account out of
// quota is never retried) or an error object inside a stream. For any
// other error it returns ok false.
func Classify(err error, now time.Time) (ledger.Classification, bool) {
	return impl.Classifier.Classify(err, now)
}

// ClientOptions returns the options every client used under the
// middleware must be built with: the SDK's own retries off. Append them
// after any other options, since a later WithMaxRetries wins.
func ClientOptions() []option.RequestOption { return impl.ClientOptions() }

// UsageOf converts the usage of a chat completion (or of the last chunk
// of a stream made with stream_options.include_usage) to the ledger's.
// A chat completion stream reports usage only in its last chunk: follow a
// stream with StreamUsage, which still reports the output streamed when
// that chunk never comes.
func UsageOf(u sdk.CompletionUsage) ledger.Usage { return impl.UsageOf(u) }

// StreamUsage follows the usage of a chat completion stream, so that a
// stream that breaks before its last chunk still reports what is known of
// what was billed. When the usage chunk arrived (the request set
// stream_options.include_usage), Usage is exactly its usage. When it did
// not, the input is not knowable from the stream, and the output is
// counted as one token per chunk that carried generated content, as
// OpenAI streams text (a lower bound when a chunk carries more). Feed it
// every chunk.
//
// Made with NewStreamUsage, it also estimates the input of a stream whose
// usage never came, from the request, with the model family's tokenizer
// (EstimateInput): Report carries it in EstimatedInputTokens, apart from
// Usage, so that the ledger records it as estimated. The zero value is
// ready to use, and estimates nothing. A StreamUsage belongs to the
// goroutine reading the stream.
type StreamUsage struct {
	s      impl.StreamUsage
	params *sdk.ChatCompletionNewParams
	seen   bool
}

// NewStreamUsage returns a StreamUsage of a stream made with params, which
// estimates the input should the usage never come.
func NewStreamUsage(params sdk.ChatCompletionNewParams) *StreamUsage {
	return &StreamUsage{params: &params}
}

// Observe takes one chunk into account.
func (s *StreamUsage) Observe(chunk sdk.ChatCompletionChunk) { s.s.Observe(chunk); s.seen = true }

// Usage returns the usage so far (see StreamUsage).
func (s *StreamUsage) Usage() ledger.Usage { return s.s.Usage() }

// Complete reports whether the usage chunk arrived.
func (s *StreamUsage) Complete() bool { return s.s.Complete() }

// ServiceTier returns the service tier the chunks named, as ServiceTierOf
// writes it; "" until one names it.
func (s *StreamUsage) ServiceTier() string { return s.s.ServiceTier() }

// EstimatedInput is the request's input estimated with the model
// family's tokenizer, when a chunk arrived but the usage chunk did not;
// 0 when the usage arrived, when no chunk did (nothing says the provider
// took the request), or for a StreamUsage not made by NewStreamUsage.
// Call it once the stream ended: each call tokenizes the request.
func (s *StreamUsage) EstimatedInput() int64 {
	if s.params == nil || !s.seen || s.s.Complete() {
		return 0
	}
	return tokensOf(impl.EstimateChatParams(*s.params))
}

// tokensOf is the tokens of an estimate, 0 when there is none.
func tokensOf(e impl.Estimate, err error) int64 {
	if err != nil {
		return 0
	}
	return e.Tokens
}

// Report is the attempt's report: Usage, ServiceTier, and EstimatedInput
// in EstimatedInputTokens.
func (s *StreamUsage) Report() ledger.Report {
	return ledger.Report{Usage: s.Usage(), ServiceTier: s.ServiceTier(), EstimatedInputTokens: s.EstimatedInput()}
}

// ResponseStreamUsage follows the usage of a Responses API stream:
// response.completed (or .incomplete, .failed) carries the usage; before
// it, as for chat streams, only the output is counted, one token per
// output delta event. Made with NewResponseStreamUsage, it estimates the
// input of a stream cut before its usage, as StreamUsage does. The zero
// value is ready to use, and estimates nothing.
type ResponseStreamUsage struct {
	s      impl.ResponseStreamUsage
	params *responses.ResponseNewParams
	seen   bool
}

// NewResponseStreamUsage returns a ResponseStreamUsage of a stream made
// with params, which estimates the input should the usage never come.
func NewResponseStreamUsage(params responses.ResponseNewParams) *ResponseStreamUsage {
	return &ResponseStreamUsage{params: &params}
}

// Observe takes one event into account.
func (s *ResponseStreamUsage) Observe(ev responses.ResponseStreamEventUnion) {
	s.s.Observe(ev)
	if ev.Type != "error" && ev.Type != "response.failed" {
		s.seen = true
	}
}

// Usage returns the usage so far (see ResponseStreamUsage).
func (s *ResponseStreamUsage) Usage() ledger.Usage { return s.s.Usage() }

// Complete reports whether the response's usage arrived.
func (s *ResponseStreamUsage) Complete() bool { return s.s.Complete() }

// ServiceTier returns the service tier the response named
// (response.created or its last event), as ServiceTierOf writes it.
func (s *ResponseStreamUsage) ServiceTier() string { return s.s.ServiceTier() }

// ServiceTierOf returns the service tier a chat completion, a chunk or a
// response names (its ServiceTier), in the ledger's form: "standard" for
// OpenAI's "default", "flex", "scale", "priority"; "" for none or "auto".
// Put it in ledger.Report.ServiceTier.
func ServiceTierOf[T ~string](tier T) string { return impl.ServiceTierOf(tier) }

// EstimatedInput is the request's input estimated when an event other
// than an error arrived but the usage did not (see
// StreamUsage.EstimatedInput).
func (s *ResponseStreamUsage) EstimatedInput() int64 {
	if s.params == nil || !s.seen || s.s.Complete() {
		return 0
	}
	return tokensOf(impl.EstimateResponseParams(*s.params))
}

// Report is the attempt's report: Usage, ServiceTier, and EstimatedInput
// in EstimatedInputTokens.
func (s *ResponseStreamUsage) Report() ledger.Report {
	return ledger.Report{Usage: s.Usage(), ServiceTier: s.ServiceTier(), EstimatedInputTokens: s.EstimatedInput()}
}

// Estimate is the input of a request counted with the model family's
// tokenizer (o200k_base for gpt-4o, gpt-4.1, gpt-5 and the o-series;
// cl100k_base for the other gpt-4 and gpt-3.5 models; o200k_base, an
// approximation, for any other model) by the rules of OpenAI's cookbook:
// on the cookbook's requests it equals what the API reported.
type Estimate struct {
	// Tokens is the estimated input.
	Tokens int64
	// Encoding names the tokenizer: "o200k_base" or "cl100k_base".
	Encoding string
	// Partial: images, audio, files or built-in tools were left out, so
	// Tokens is short of the input by what they cost.
	Partial bool
	// Sampled: the text was longer than the estimator tokenizes (256
	// KiB); the rest was counted at the rate of the text before it.
	Sampled bool
}

// EstimateInput estimates the input tokens of a chat completion request:
// each message's role, text and name, its tool calls, the function
// tools, and the per-message overheads. It is the estimate a stream cut
// before its usage is recorded with (StreamUsage.Report).
func EstimateInput(params sdk.ChatCompletionNewParams) (Estimate, error) {
	e, err := impl.EstimateChatParams(params)
	return Estimate(e), err
}

// EstimateResponseInput estimates the input tokens of a Responses
// request: its instructions, its input items and its function tools.
func EstimateResponseInput(params responses.ResponseNewParams) (Estimate, error) {
	e, err := impl.EstimateResponseParams(params)
	return Estimate(e), err
}

// ResponseUsageOf converts the usage of a Responses API response to the
// ledger's.
func ResponseUsageOf(u responses.ResponseUsage) ledger.Usage {
	return impl.ResponseUsageOf(u)
}

// RequestID returns the x-request-id of a response's headers, or "" when
// there is none or it does not fit the contract.
func RequestID(h http.Header) string { return impl.RequestID(h) }

// RateLimitReset reads the x-ratelimit-reset-requests or -tokens duration
// of each limit whose x-ratelimit-remaining-* is 0 (the longer when both
// are), for callers that pace themselves; ok is false when no exhausted
// limit has a parseable reset.
func RateLimitReset(h http.Header) (d time.Duration, ok bool) { return impl.RateLimitReset(h) }
