package ledgertest

import (
	"strings"
	"testing"
	"time"

	"github.com/agentledger/ledger"
	_ "github.com/agentledger/ledger/internal/provider/builtin" // the providers the fakes speak
	"github.com/agentledger/ledger/internal/provider/fakekit"
	"github.com/agentledger/ledger/internal/sim/fakeprovider"
)

// Step is what a fake upstream does with one request.
type Step struct{ s fakeprovider.Step }

// Succeed answers with a successful response that reports usage u.
func Succeed(u ledger.Usage) Step {
	return Step{fakeprovider.Step{Fault: fakeprovider.FaultNone, Usage: u}}
}

// RateLimited answers 429 with the hint retry-after (retry-after-ms and
// retry-after headers; a RetryInfo detail for Gemini).
func RateLimited(retryAfter time.Duration) Step {
	return Step{fakeprovider.Step{Fault: fakeprovider.FaultRateLimit, RetryAfter: retryAfter}}
}

// Overloaded answers the provider's overload: 529 (Anthropic) or 503
// (OpenAI, Gemini).
func Overloaded() Step { return Step{fakeprovider.Step{Fault: fakeprovider.FaultOverload}} }

// ServerError answers 500.
func ServerError() Step { return Step{fakeprovider.Step{Fault: fakeprovider.FaultServerError}} }

// BadRequest answers 400, which is never retried.
func BadRequest() Step { return Step{fakeprovider.Step{Fault: fakeprovider.FaultBadRequest}} }

// FailAfterBilling bills u and then fails with a server error. On a
// streamed request (Anthropic, Gemini) the stream reports u first, so the
// agent can record what it was billed (anthropic.StreamUsage,
// gemini.StreamUsage), then sends the error event; a request that does
// not stream gets a plain 500, which carries no usage, as with the real
// APIs.
func FailAfterBilling(u ledger.Usage) Step {
	return Step{fakeprovider.Step{Fault: fakeprovider.FaultBilledError, Usage: u}}
}

// StallAfterBilling starts a streamed answer that reports (and bills) u,
// then stalls until the client gives up (its attempt timeout). A request
// that does not stream stalls without billing.
func StallAfterBilling(u ledger.Usage) Step {
	return Step{fakeprovider.Step{Fault: fakeprovider.FaultBilledTimeout, Usage: u}}
}

// CutStream starts a streamed answer, streams u's output (one token per
// content event) and cuts the connection; the provider bills u. A chat
// completion stream reports its usage only in its last chunk, so an
// OpenAI client never learns the input: the openai adapter's
// NewStreamUsage (and the gateway) record it as estimated from the
// request, apart from the usage. A request that does not stream is cut
// before any answer, and billed nothing.
func CutStream(u ledger.Usage) Step {
	return Step{fakeprovider.Step{Fault: fakeprovider.FaultBrokenStream, Usage: u}}
}

// Upstream is a fake model API answering the official SDK client of its
// provider with a script: the n-th request it receives gets the n-th
// step, whatever it asks. A request past the last step is answered 500
// and fails the test at cleanup.
type Upstream struct {
	srv      *fakeprovider.Server
	provider string
}

// FakeUpstream starts a fake of the API of the provider named provider
// (any built-in provider with a fake dialect: "anthropic", "openai",
// "gemini") that answers with steps; point the provider's SDK client at
// it with u.URL() as its base URL and any API key. An unknown provider
// fails the test.
func FakeUpstream(t testing.TB, provider string, steps ...Step) *Upstream {
	t.Helper()
	d, ok := fakeprovider.Dialect(provider)
	if !ok {
		t.Fatalf("ledgertest: no fake upstream for provider %q; there are: %s", provider, strings.Join(fakeprovider.Providers(), ", "))
	}
	script := make([]fakeprovider.Step, len(steps))
	for i, s := range steps {
		script[i] = s.s
	}
	srv, err := fakeprovider.New(fakeprovider.Options{Script: script, Dialects: []*fakekit.Dialect{d}})
	if err != nil {
		t.Fatalf("ledgertest: %v", err)
	}
	t.Cleanup(func() {
		srv.Close()
		if n := srv.Unscripted(); n > 0 {
			t.Errorf("ledgertest: the fake %s upstream got %d request(s) after its %d scripted step(s)", provider, n, len(steps))
		}
	})
	return &Upstream{srv: srv, provider: provider}
}

// FakeAnthropic starts a fake Anthropic Messages API that answers with
// steps; point the client at it with option.WithBaseURL(u.URL()) and any
// API key. It is FakeUpstream(t, "anthropic", steps...).
func FakeAnthropic(t testing.TB, steps ...Step) *Upstream {
	t.Helper()
	return FakeUpstream(t, "anthropic", steps...)
}

// FakeOpenAI starts a fake OpenAI Chat Completions API (without
// streaming) that answers with steps; point the client at it with
// option.WithBaseURL(u.URL()) and any API key. It is FakeUpstream(t,
// "openai", steps...).
func FakeOpenAI(t testing.TB, steps ...Step) *Upstream {
	t.Helper()
	return FakeUpstream(t, "openai", steps...)
}

// FakeGemini starts a fake Gemini generateContent API (API version
// v1beta) that answers with steps; point the client at it with
// genai.HTTPOptions{BaseURL: u.URL()} and any API key. It is
// FakeUpstream(t, "gemini", steps...).
func FakeGemini(t testing.TB, steps ...Step) *Upstream {
	t.Helper()
	return FakeUpstream(t, "gemini", steps...)
}

// URL is the base URL to give the provider's SDK client.
func (u *Upstream) URL() string { return u.srv.BaseURL(u.provider) }

// Requests is how many requests the upstream has received: with the
// SDK's own retries off, one per attempt.
func (u *Upstream) Requests() int { return int(u.srv.Requests()) }
