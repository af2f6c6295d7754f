package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	asdk "github.com/anthropics/anthropic-sdk-go/v2"
	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/agentledger/ledger"
	"github.com/agentledger/ledger/internal/gateway"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/retry"
	"github.com/agentledger/ledger/internal/testkit"
	"github.com/agentledger/ledger/ledgertest"
	"github.com/agentledger/ledger/provider/anthropic"
	"github.com/agentledger/ledger/provider/gemini"
	"github.com/agentledger/ledger/provider/openai"
)

// The default policy bounds an attempt and the silence of a stream as the
// gateway does: an agent whose upstream stalls is not left hanging.
func TestDefaultPolicyHasTheGatewaysTimeouts(t *testing.T) {
	for name, p := range map[string]ledger.Policy{"ledger": ledger.DefaultPolicy(), "retry": ledger.Policy(retry.DefaultPolicy())} {
		assert.Equal(t, gateway.DefaultAttemptTimeout, p.AttemptTimeout, name)
		assert.Equal(t, gateway.DefaultStreamIdleTimeout, p.StreamIdleTimeout, name)
	}
	assert.Equal(t, gateway.DefaultAttemptTimeout, ledger.DefaultAttemptTimeout)
	assert.Equal(t, gateway.DefaultStreamIdleTimeout, ledger.DefaultStreamIdleTimeout)
	assert.Equal(t, names.AttemptsStream, ledger.Stream)
}

// newMiddleware returns a middleware on a fresh embedded ledger, with a
// fast policy that keeps the default timeouts unless changed by mod.
func newMiddleware(t *testing.T, mod func(*ledger.Policy), opts ...ledger.MiddlewareOption) *ledger.Middleware {
	t.Helper()
	l := ledgertest.Start(t, ledgertest.WithoutAggregator())
	p := ledger.DefaultPolicy()
	p.BaseDelay, p.MaxDelay, p.Jitter = time.Millisecond, time.Millisecond, 0
	if mod != nil {
		mod(&p)
	}
	mw, err := ledger.NewMiddleware(l.Publisher(t), append([]ledger.MiddlewareOption{ledger.WithPolicy(p)}, opts...)...)
	require.NoError(t, err)
	return mw
}

// Without WithClassifiers, a provider's 500 is retried: the middleware
// knows the three SDKs.
func TestServerErrorRetriedByDefault(t *testing.T) {
	mw := newMiddleware(t, nil)
	for _, tt := range []struct {
		provider string
		err      error
	}{
		{openai.Name, &sdk.Error{StatusCode: 500, Response: &http.Response{StatusCode: 500, Header: http.Header{}}}},
		{anthropic.Name, &asdk.Error{StatusCode: 500, Response: &http.Response{StatusCode: 500, Header: http.Header{}}}},
		{gemini.Name, genai.APIError{Code: 500, Status: "INTERNAL", Message: "boom"}},
	} {
		var calls int
		got, err := ledger.Do(t.Context(), mw, ledger.Call{SessionID: "s", Provider: tt.provider, Model: "m"},
			func(context.Context, ledger.Attempt) (string, ledger.Report, error) {
				if calls++; calls == 1 {
					return "", ledger.Report{}, tt.err
				}
				return "ok", ledger.Report{}, nil
			})
		require.NoError(t, err, tt.provider)
		assert.Equal(t, "ok", got, tt.provider)
		assert.Equal(t, 2, calls, tt.provider)
	}
}

// A call to a provider that no classifier is for is refused before any
// attempt, naming the provider and the fix; a classifier named for it, or
// one for every provider, lets it through.
func TestProviderWithoutClassifierIsAnError(t *testing.T) {
	never := func(context.Context, ledger.Attempt) (int, ledger.Report, error) {
		t.Error("the function was called")
		return 0, ledger.Report{}, nil
	}
	ok := func(context.Context, ledger.Attempt) (int, ledger.Report, error) { return 1, ledger.Report{}, nil }
	unknown := ledger.ClassifierFunc(func(error, time.Time) (ledger.Classification, bool) { return ledger.Classification{}, false })
	call := ledger.Call{SessionID: "s", Provider: "mistral", Model: "m"}

	mw := newMiddleware(t, nil)
	_, err := ledger.Do(t.Context(), mw, call, never)
	require.ErrorIs(t, err, ledger.ErrNoClassifier)
	assert.ErrorContains(t, err, `provider "mistral"`)
	assert.ErrorContains(t, err, "anthropic, gemini, openai")
	assert.Zero(t, mw.Stats().Calls)
	assert.Zero(t, mw.Stats().Events)

	for name, c := range map[string]ledger.Classifier{
		"named":        ledger.ClassifierFor("mistral", openai.Classifier),
		"any provider": unknown,
	} {
		mw := newMiddleware(t, nil, ledger.WithClassifiers(c))
		_, err := ledger.Do(t.Context(), mw, call, ok)
		assert.NoError(t, err, name)
	}
	mw = newMiddleware(t, nil, ledger.WithClassifiers(ledger.ClassifierFor("groq", openai.Classifier)))
	_, err = ledger.Do(t.Context(), mw, call, never)
	assert.ErrorIs(t, err, ledger.ErrNoClassifier)
}

// A stalled attempt ends with a retryable timeout; so does a stream that
// went silent after its first bytes, read through an SDK client built with
// the adapter's ClientOptions (which report each read of a stream).
func TestStalledAttemptsEnd(t *testing.T) {
	stall := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // so that the server sees the client go
		if strings.Contains(r.URL.Path, "stall") {
			select {
			case <-r.Context().Done():
			case <-stall:
			}
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"c1","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"content":"hi"}}]}`+"\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-stall:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stall) }) // before srv.Close
	client := sdk.NewClient(append([]option.RequestOption{option.WithBaseURL(srv.URL), option.WithAPIKey("k")}, openai.ClientOptions()...)...)
	params := sdk.ChatCompletionNewParams{Model: "m", Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("hi")}}

	for _, tt := range []struct {
		name   string
		policy func(*ledger.Policy)
		fn     func(ctx context.Context, a ledger.Attempt) (int, ledger.Report, error)
		want   string
	}{
		{"attempt", func(p *ledger.Policy) { p.AttemptTimeout = 50 * time.Millisecond },
			func(ctx context.Context, _ ledger.Attempt) (int, ledger.Report, error) {
				_, err := client.Chat.Completions.New(ctx, params, option.WithBaseURL(srv.URL+"/stall/"))
				return 0, ledger.Report{}, err
			}, "attempt timeout"},
		{"stream", func(p *ledger.Policy) { p.AttemptTimeout, p.StreamIdleTimeout = time.Hour, 50*time.Millisecond },
			func(ctx context.Context, _ ledger.Attempt) (int, ledger.Report, error) {
				s := client.Chat.Completions.NewStreaming(ctx, params)
				defer s.Close()
				n := 0
				for s.Next() {
					n++
				}
				return n, ledger.Report{}, s.Err()
			}, "stream idle timeout"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mw := newMiddleware(t, func(p *ledger.Policy) { p.MaxRetries = 1; tt.policy(p) })
			// The bound of the test, not of the call: the old code hangs here.
			ctx, cancel := context.WithTimeoutCause(t.Context(), 30*time.Second, errors.New("the stalled attempt never ended"))
			defer cancel()
			_, err := ledger.Do(ctx, mw, ledger.Call{SessionID: "s", Provider: openai.Name, Model: "m"}, tt.fn)
			var ce *ledger.CallError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, ledger.StopExhausted, ce.Reason, "a timeout is retried")
			assert.Equal(t, 2, ce.Attempts)
			assert.Equal(t, ledger.KindTimeout, ce.Classification.Kind)
			assert.Contains(t, ce.Classification.Message, tt.want)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
		})
	}
}

// An SDK built without the adapter's ClientOptions retries on its own;
// the middleware says so at WARN, once.
func TestSDKRetriesWarnedOnce(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if requests.Add(1)%2 == 1 {
			w.Header().Set("Retry-After-Ms", "1")
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"error":{"message":"boom","type":"server_error"}}`)
			return
		}
		fmt.Fprint(w, `{"id":"c1","object":"chat.completion","created":0,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`)
	}))
	t.Cleanup(srv.Close)
	client := sdk.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("k")) // no ClientOptions: the SDK retries
	var logs testkit.Logs
	mw := newMiddleware(t, nil, ledger.WithMiddlewareLogger(logs.TextLogger(slog.LevelInfo)))
	for range 3 {
		_, err := ledger.Do(t.Context(), mw, ledger.Call{SessionID: "s", Provider: openai.Name, Model: "m"},
			func(ctx context.Context, _ ledger.Attempt) (*sdk.ChatCompletion, ledger.Report, error) {
				c, err := client.Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{Model: "m", Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("hi")}})
				return c, ledger.Report{}, err
			})
		require.NoError(t, err)
	}
	assert.EqualValues(t, 6, requests.Load(), "each call: the SDK's own retry")
	assert.EqualValues(t, 3, mw.Stats().Attempts, "the ledger saw one attempt per call")
	assert.Equal(t, 1, strings.Count(logs.String(), "level=WARN"), logs.String())
	assert.Contains(t, logs.String(), "an SDK retries on its own")
	assert.Contains(t, logs.String(), "X-Stainless-Retry-Count is 1")
}

// An SDK that retries without a retry-count header (genai with retry
// options of its own, or continuing a response) is noticed by its second
// request within one attempt, once.
func TestSecondRequestInAnAttemptWarnedOnce(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
	t.Cleanup(srv.Close)
	var logs testkit.Logs
	mw := newMiddleware(t, nil, ledger.WithMiddlewareLogger(logs.TextLogger(slog.LevelInfo)))
	post := func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("{}"))
		if err != nil {
			return err
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}
	for range 2 {
		_, err := ledger.Do(t.Context(), mw, ledger.Call{SessionID: "s", Provider: gemini.Name, Model: "m"},
			func(ctx context.Context, _ ledger.Attempt) (int, ledger.Report, error) {
				return 0, ledger.Report{}, errors.Join(post(ctx), post(ctx))
			})
		require.NoError(t, err)
	}
	assert.Equal(t, 1, strings.Count(logs.String(), "level=WARN"), logs.String())
	assert.Contains(t, logs.String(), "a second request was sent within one attempt")
}
