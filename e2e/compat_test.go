package e2e

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	osdk "github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/provider"
	"github.com/agentledger/ledger/internal/provider/fakekit"
	"github.com/agentledger/ledger/internal/provider/openai"
	"github.com/agentledger/ledger/internal/sim/fakeprovider"
	"github.com/agentledger/ledger/ledgertest"
)

// compatCall is one call of the OpenAI-compatible end-to-end test: what
// the fake provider answers its attempts (the script's steps, in order),
// and what the ledger and the client must see.
type compatCall struct {
	name     string
	stream   bool
	steps    []fakeprovider.Step
	wantOK   bool
	status   int                // the client's error status when !wantOK
	kinds    []events.ErrorKind // of the failed attempts, in order
	attempts int
}

// TestCompatiblePresetsThroughTheGateway: the openai-go SDK, pointed at
// http://gateway/mistral/v1 and http://gateway/ollama/v1, reaches the
// fake provider speaking Mistral's and Ollama's dialects (their error
// bodies, rate-limit headers, Mistral's usage streamed unasked), and the
// ledger records each call under provider "mistral" or "ollama", with the
// preset's classification of each failed attempt: Mistral's capacity 429
// is an overload, Ollama's busy 503 is retried and its missing model is
// not, a stream that fails after the provider billed leaves its streamed
// output as billed overhead.
func TestCompatiblePresetsThroughTheGateway(t *testing.T) {
	u := func(in, out int64) events.Usage { return events.Usage{InputTokens: in, OutputTokens: out} }
	ok := func(us events.Usage) fakeprovider.Step { return fakeprovider.Step{Fault: fakekit.FaultNone, Usage: us} }
	fault := func(f fakekit.Fault) fakeprovider.Step {
		return fakeprovider.Step{Fault: f, RetryAfter: 20 * time.Millisecond, Usage: u(30, 5)}
	}
	calls := map[string][]compatCall{
		"mistral": {
			{name: "success", steps: []fakeprovider.Step{ok(u(120, 17))}, wantOK: true, attempts: 1},
			{name: "stream, usage unasked", stream: true, steps: []fakeprovider.Step{ok(u(80, 9))}, wantOK: true, attempts: 1},
			{name: "rate limit then capacity 429 then success", steps: []fakeprovider.Step{fault(fakekit.FaultRateLimit), fault(fakekit.FaultOverload), ok(u(64, 8))},
				wantOK: true, kinds: []events.ErrorKind{events.KindRateLimit, events.KindOverloaded}, attempts: 3},
		},
		"ollama": {
			{name: "success", steps: []fakeprovider.Step{ok(u(200, 31))}, wantOK: true, attempts: 1},
			{name: "busy 503 then success", steps: []fakeprovider.Step{fault(fakekit.FaultOverload), ok(u(50, 6))},
				wantOK: true, kinds: []events.ErrorKind{events.KindOverloaded}, attempts: 2},
			{name: "stream fails after billing", stream: true, steps: []fakeprovider.Step{fault(fakekit.FaultBilledError)},
				kinds: []events.ErrorKind{events.KindServer}, attempts: 1},
			{name: "model not pulled", steps: []fakeprovider.Step{fault(fakekit.FaultBadRequest)},
				status: http.StatusNotFound, kinds: []events.ErrorKind{events.KindClient}, attempts: 1},
		},
	}
	var script []fakeprovider.Step
	var added []provider.Provider
	dialects := fakeprovider.Dialects()
	for _, name := range []string{"mistral", "ollama"} {
		p, err := openai.Compatible(name, openai.Config{Preset: name})
		require.NoError(t, err)
		added = append(added, p)
		dialects = append(dialects, p.(fakekit.Faker).Fake())
		for _, c := range calls[name] {
			script = append(script, c.steps...)
		}
	}
	r := startRig(t, fakeprovider.Options{Script: script, Dialects: dialects}, rigPolicy(), added...)

	ctx := context.Background()
	n := 0
	var billedFailure string // the request of the stream that fails after billing
	for _, name := range []string{"mistral", "ollama"} {
		client := osdk.NewClient(ooption.WithBaseURL(r.url+"/"+name+"/v1"), ooption.WithAPIKey("key-"+name), ooption.WithMaxRetries(0))
		for _, c := range calls[name] {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				n++
				ids := callIDs{session: "s-compat", request: "r-compat-" + strconv.Itoa(n)}
				if c.stream && !c.wantOK {
					billedFailure = ids.request
				}
				var got events.Usage
				var err error
				if c.stream {
					stream := client.Chat.Completions.NewStreaming(ctx, compatParams(name), ids.openai()...)
					var su openai.StreamUsage
					for stream.Next() {
						su.Observe(stream.Current())
					}
					err = stream.Err()
					got = su.Usage()
					if err == nil {
						assert.True(t, su.Complete(), "the stream's usage reached the client")
					}
				} else {
					var cc *osdk.ChatCompletion
					if cc, err = client.Chat.Completions.New(ctx, compatParams(name), ids.openai()...); err == nil {
						got = openai.UsageOf(cc.Usage)
					}
				}
				last := c.steps[len(c.steps)-1]
				if c.wantOK {
					require.NoError(t, err)
					assert.Equal(t, last.Usage, got)
				} else {
					require.Error(t, err)
					var oe *osdk.Error
					if !c.stream {
						require.ErrorAs(t, err, &oe)
						assert.Equal(t, c.status, oe.StatusCode)
					}
				}

				rec := r.ledger.WaitRequest(t, ids.request)
				assert.Equal(t, name, rec.Provider)
				assert.Equal(t, c.attempts, rec.Attempts)
				if c.wantOK {
					assert.Equal(t, ledgertest.StatusSucceeded, rec.Status)
					assert.Equal(t, ledger.Usage(last.Usage), rec.Usage)
				} else {
					assert.Equal(t, ledgertest.StatusFailed, rec.Status)
				}
				truth := r.fp.Truth().Requests[ids.request]
				assert.Equal(t, ledger.Usage(truth.Billed.Sub(truth.Unobservable)), rec.Billed, "billed: every attempt, as the provider charged")
				assert.Equal(t, c.kinds, failedKinds(r, ids.request))
			})
		}
	}
	assert.Zero(t, r.fp.Unscripted(), "every request had its step")
	failed := r.ledger.Request(t, billedFailure)
	assert.Positive(t, failed.Billed.OutputTokens, "the failed stream's output is billed overhead, with no usage")
	assert.Zero(t, failed.Usage)
}

// failedKinds are the error kinds of the failed attempts of a request, in
// the order the gateway published them.
func failedKinds(r *gatewayRig, requestID string) []events.ErrorKind {
	var out []events.ErrorKind
	for _, ev := range r.events.Events() {
		if ev.RequestID == requestID && ev.Error != nil {
			out = append(out, ev.Error.Kind)
		}
	}
	return out
}

func compatParams(provider string) osdk.ChatCompletionNewParams {
	model := map[string]string{"mistral": "mistral-small-latest", "ollama": "llama3.2"}[provider]
	return osdk.ChatCompletionNewParams{Model: model, Messages: []osdk.ChatCompletionMessageParamUnion{osdk.UserMessage("Hello")}}
}
