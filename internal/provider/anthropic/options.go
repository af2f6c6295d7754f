package anthropic

import "github.com/anthropics/anthropic-sdk-go/v2/option"

// ClientOptions returns the options every client used under the retry
// middleware must be built with: the SDK's own retries off (it retries
// twice by default), so that each attempt the provider bills is one the
// middleware sees and records. Append them after any other options, since
// a later WithMaxRetries wins.
//
// An attempt timeout belongs to the middleware (a context deadline on the
// attempt); option.WithRequestTimeout works too and makes the call return
// context.DeadlineExceeded.
func ClientOptions() []option.RequestOption {
	return []option.RequestOption{option.WithMaxRetries(0)}
}
