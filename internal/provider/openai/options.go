package openai

import "github.com/openai/openai-go/v3/option"

// ClientOptions returns the options every client used under the retry
// middleware must be built with: the SDK's own retries off (it retries
// twice by default, backing off up to 8 seconds and honouring Retry-After
// up to 2 minutes), so that each attempt the provider bills is one the
// middleware sees and records. Append them after any other options, since
// a later WithMaxRetries wins.
func ClientOptions() []option.RequestOption {
	return []option.RequestOption{option.WithMaxRetries(0)}
}
