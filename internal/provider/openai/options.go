package openai

import (
	"net/http"

	"github.com/openai/openai-go/v3/option"

	"github.com/agentledger/ledger/internal/retry"
)

// ClientOptions returns the options every client used under the retry
// middleware must be built with: the SDK's own retries off (it retries
// twice by default, backing off up to 8 seconds and honouring Retry-After
// up to 2 minutes), so that each attempt the provider bills is one the
// middleware sees and records. Append them after any other options, since
// a later WithMaxRetries wins.
//
// The second option reports the progress of each stream to the
// middleware (retry.StreamProgress), so that a stream is bounded by the
// policy's idle timeout after its first byte rather than by its attempt
// timeout as a whole.
func ClientOptions() []option.RequestOption {
	return []option.RequestOption{option.WithMaxRetries(0), option.WithMiddleware(streamProgress)}
}

// streamProgress is the SDK middleware that reports a stream's progress.
func streamProgress(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	resp, err := next(req)
	retry.StreamProgress(req.Context(), resp)
	return resp, err
}
