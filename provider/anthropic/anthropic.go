package anthropic

import (
	"net/http"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/agentledger/ledger"
	impl "github.com/agentledger/ledger/internal/provider/anthropic"
)

// Name is the provider of the calls made with this SDK, for ledger.Call.
const Name = "anthropic"

// RequestIDHeader is the response header in which Anthropic names the
// request.
const RequestIDHeader = "request-id"

// Classifier classifies the errors of the Anthropic SDK, for
// ledger.WithClassifiers, named for Name. The middleware classifies this
// SDK's errors without it (this package registers them when imported); it
// is for a chain of one's own. It is safe for
// concurrent use.
var Classifier = ledger.ClassifierFor(Name, ledger.ClassifierFunc(Classify))

// Classify classifies a *anthropic.Error anywhere in err's chain: an HTTP
// error response by its status, x-should-retry and Retry-After headers,
// an error event inside a stream by its error type; an account out of
// credit is never retried. For any other error it returns ok false.
func Classify(err error, now time.Time) (ledger.Classification, bool) {
	return impl.Classifier.Classify(err, now)
}

// ClientOptions returns the options every client used under the
// middleware must be built with: the SDK's own retries off. Append them
// after any other options, since a later WithMaxRetries wins.
func ClientOptions() []option.RequestOption { return impl.ClientOptions() }

// UsageOf converts the usage of a message to the ledger's. Anthropic's
// input_tokens excludes the prompt cache's tokens, while the ledger's
// InputTokens counts every input token, so the cache counts are added to
// it; they are also reported as its subsets. The 1-hour cache write
// (cache_creation.ephemeral_1h_input_tokens) is CacheCreation1hInputTokens
// and the thinking part of the output (output_tokens_details.thinking_tokens)
// ReasoningTokens.
func UsageOf(u sdk.Usage) ledger.Usage { return impl.UsageOf(u) }

// ServiceTierOf returns the service tier a message's usage names
// ("standard", "priority", "batch"), "" when it names none: put it in
// ledger.Report.ServiceTier.
func ServiceTierOf(u sdk.Usage) string { return impl.ServiceTierOf(u) }

// RequestID returns the request id of a successful response's headers
// (read them with option.WithResponseInto), or "" when there is none or it
// does not fit the contract.
func RequestID(h http.Header) string { return impl.RequestID(h) }

// StreamUsage follows the usage a message stream reports, so that a
// stream that fails midway still yields what was billed: message_start
// carries the input counts, each message_delta the output so far. Feed it
// every event of the stream; Usage then returns the usage so far, whether
// or not the stream ended. The zero value is ready to use; it belongs to
// the goroutine reading the stream.
type StreamUsage struct {
	s impl.StreamUsage
}

// Observe takes one event of the stream into account.
func (s *StreamUsage) Observe(ev sdk.MessageStreamEventUnion) { s.s.Observe(ev) }

// Usage returns the usage observed so far, in the ledger's terms (see
// UsageOf).
func (s *StreamUsage) Usage() ledger.Usage { return s.s.Usage() }

// ServiceTier returns the service tier message_start named, "" before it
// or when it named none.
func (s *StreamUsage) ServiceTier() string { return s.s.ServiceTier() }
