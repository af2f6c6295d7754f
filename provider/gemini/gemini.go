package gemini

import (
	"time"

	"google.golang.org/genai"

	"github.com/agentledger/ledger"
	impl "github.com/agentledger/ledger/internal/provider/gemini"
)

// Name is the provider of the calls made with this SDK, for ledger.Call.
const Name = "gemini"

// Classifier classifies the errors of the Gen AI SDK, for
// ledger.WithClassifiers, named for Name. The middleware classifies this
// SDK's errors without it (this package registers them when imported); it
// is for a chain of one's own. It is safe for
// concurrent use.
var Classifier = ledger.ClassifierFor(Name, ledger.ClassifierFunc(Classify))

// Classify classifies a genai.APIError (or *genai.APIError) anywhere in
// err's chain: by its HTTP status, google.rpc status and details (the
// RetryInfo delay is the hint; an exhausted daily or billing quota is never
// retried). For any other error it returns ok false.
func Classify(err error, now time.Time) (ledger.Classification, bool) {
	return impl.Classifier.Classify(err, now)
}

// ClientConfig returns a copy of base (nil is the zero config) with the
// SDK's HTTP retries off, for genai.NewClient. Build each request's config
// with GenerateContentConfig as well.
func ClientConfig(base *genai.ClientConfig) *genai.ClientConfig { return impl.ClientConfig(base) }

// GenerateContentConfig returns a copy of base (nil is the zero config)
// with automatic continuation off, and with the SDK's HTTP retries off if
// base has HTTPOptions of its own, for GenerateContent and
// GenerateContentStream.
func GenerateContentConfig(base *genai.GenerateContentConfig) *genai.GenerateContentConfig {
	return impl.GenerateContentConfig(base)
}

// NoRetries returns retry options that make genai send each request once,
// for a request that sets HTTPOptions of its own.
func NoRetries() *genai.HTTPRetryOptions { return impl.NoRetries() }

// UsageOf converts the usage metadata of a response (for a stream, the
// last chunk that has any) to the ledger's; a nil response or one without
// usage metadata gives zero usage. Tool-use prompt tokens count as input
// and thinking tokens as output.
func UsageOf(resp *genai.GenerateContentResponse) ledger.Usage {
	return impl.UsageOf(resp)
}

// MetadataUsage converts usage metadata as UsageOf does; nil gives zero
// usage.
func MetadataUsage(m *genai.GenerateContentResponseUsageMetadata) ledger.Usage {
	return impl.MetadataUsage(m)
}

// ResponseID returns the response's responseId, the provider's name of
// the request for Report.ProviderRequestID, or "" when there is none or it
// does not fit the contract. The Gemini API sends no request-id header
// (the other adapters' RequestID reads one), and its errors carry no
// identifier.
func ResponseID(resp *genai.GenerateContentResponse) string { return impl.RequestID(resp) }

// RequestID is ResponseID.
//
// Deprecated: use ResponseID. In the other adapters RequestID reads a
// response header, which Gemini does not send; this one takes the
// response, hence the new name.
func RequestID(resp *genai.GenerateContentResponse) string { return ResponseID(resp) }

// StreamUsage follows the usage of a GenerateContentStream, so that a
// stream that fails midway still yields what its last chunk reported.
// The zero value is ready to use; it belongs to the goroutine ranging over
// the stream.
type StreamUsage struct {
	s impl.StreamUsage
}

// Observe takes one chunk into account; a nil chunk or one without usage
// metadata changes nothing.
func (s *StreamUsage) Observe(chunk *genai.GenerateContentResponse) { s.s.Observe(chunk) }

// Usage returns the usage of the latest chunk that had any.
func (s *StreamUsage) Usage() ledger.Usage { return s.s.Usage() }
