package openai

import (
	"net/http"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentledger/ledger"
	"github.com/agentledger/ledger/internal/bridge"
	impl "github.com/agentledger/ledger/internal/provider/openai"
)

// Name is the provider of the calls made with this SDK, for ledger.Call.
const Name = "openai"

// RequestIDHeader is the response header in which OpenAI names the
// request.
const RequestIDHeader = "x-request-id"

// Classifier classifies the errors of the OpenAI SDK, for
// ledger.WithClassifiers. It is safe for concurrent use.
var Classifier ledger.Classifier = ledger.ClassifierFunc(Classify)

// Classify classifies a *openai.Error (by its status, x-should-retry and
// Retry-After headers; a 429 without Retry-After takes its hint from the
// x-ratelimit-reset-* header of the exhausted limit; an account out of
// quota is never retried) or an error object inside a stream. For any
// other error it returns ok false.
func Classify(err error, now time.Time) (ledger.Classification, bool) {
	return bridge.Classify(impl.Classifier, err, now)
}

// ClientOptions returns the options every client used under the
// middleware must be built with: the SDK's own retries off. Append them
// after any other options, since a later WithMaxRetries wins.
func ClientOptions() []option.RequestOption { return impl.ClientOptions() }

// UsageOf converts the usage of a chat completion (or of the last chunk
// of a stream made with stream_options.include_usage) to the ledger's.
// A chat completion stream reports usage only in its last chunk, so a
// stream that fails midway has none to report.
func UsageOf(u sdk.CompletionUsage) ledger.Usage { return ledger.Usage(impl.UsageOf(u)) }

// ResponseUsageOf converts the usage of a Responses API response to the
// ledger's.
func ResponseUsageOf(u responses.ResponseUsage) ledger.Usage {
	return ledger.Usage(impl.ResponseUsageOf(u))
}

// RequestID returns the x-request-id of a response's headers, or "" when
// there is none or it does not fit the contract.
func RequestID(h http.Header) string { return impl.RequestID(h) }

// RateLimitReset reads the x-ratelimit-reset-requests or -tokens duration
// of each limit whose x-ratelimit-remaining-* is 0 (the longer when both
// are), for callers that pace themselves; ok is false when no exhausted
// limit has a parseable reset.
func RateLimitReset(h http.Header) (d time.Duration, ok bool) { return impl.RateLimitReset(h) }
