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
// every chunk. The zero value is ready to use; it belongs to the goroutine
// reading the stream.
type StreamUsage struct {
	s impl.StreamUsage
}

// Observe takes one chunk into account.
func (s *StreamUsage) Observe(chunk sdk.ChatCompletionChunk) { s.s.Observe(chunk) }

// Usage returns the usage so far (see StreamUsage).
func (s *StreamUsage) Usage() ledger.Usage { return s.s.Usage() }

// Complete reports whether the usage chunk arrived.
func (s *StreamUsage) Complete() bool { return s.s.Complete() }

// ServiceTier returns the service tier the chunks named, as ServiceTierOf
// writes it; "" until one names it.
func (s *StreamUsage) ServiceTier() string { return s.s.ServiceTier() }

// ResponseStreamUsage follows the usage of a Responses API stream:
// response.completed (or .incomplete, .failed) carries the usage; before
// it, as for chat streams, only the output is counted, one token per
// output delta event. The zero value is ready to use.
type ResponseStreamUsage struct {
	s impl.ResponseStreamUsage
}

// Observe takes one event into account.
func (s *ResponseStreamUsage) Observe(ev responses.ResponseStreamEventUnion) { s.s.Observe(ev) }

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
