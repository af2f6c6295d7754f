package openai

import (
	"errors"
	"net/http"
	"testing"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/provider/fakekit"
	"github.com/agentledger/ledger/internal/sim/fakeprovider"
	fpt "github.com/agentledger/ledger/internal/sim/fakeprovider/fakeprovidertest"
)

// compatFake starts a fake provider speaking the preset's dialect with
// one scripted step, and returns a client of it built as the preset's
// clients are.
func compatFake(t *testing.T, preset string, step fakeprovider.Step) (*fakeprovider.Server, sdk.Client, *compatProvider) {
	t.Helper()
	p, err := Compatible(preset, Config{Preset: preset})
	require.NoError(t, err)
	cp := p.(*compatProvider)
	s := fpt.Start(t, fakeprovider.Options{Script: []fakeprovider.Step{step}}, cp.Fake())
	client := sdk.NewClient(append([]option.RequestOption{option.WithBaseURL(s.BaseURL(preset)), option.WithAPIKey("k")}, CompatClientOptions(preset)...)...)
	return s, client, cp
}

// TestCompatFakeFaults: every fault a preset's fake answers its own way
// is classified by the preset's rules, the same from the SDK's error as
// from the raw response, as a gateway would.
func TestCompatFakeFaults(t *testing.T) {
	want := map[string]map[fakekit.Fault]events.ErrorKind{
		"mistral":    {fakekit.FaultRateLimit: events.KindRateLimit, fakekit.FaultOverload: events.KindOverloaded},
		"groq":       {fakekit.FaultRateLimit: events.KindRateLimit, fakekit.FaultOverload: events.KindOverloaded},
		"deepseek":   {fakekit.FaultOverload: events.KindOverloaded},
		"together":   {fakekit.FaultRateLimit: events.KindRateLimit, fakekit.FaultOverload: events.KindOverloaded},
		"openrouter": {fakekit.FaultRateLimit: events.KindRateLimit, fakekit.FaultOverload: events.KindOverloaded},
		"vllm":       {fakekit.FaultOverload: events.KindOverloaded, fakekit.FaultServerError: events.KindServer, fakekit.FaultBadRequest: events.KindClient},
		"ollama":     {fakekit.FaultOverload: events.KindOverloaded, fakekit.FaultServerError: events.KindServer, fakekit.FaultBadRequest: events.KindClient},
	}
	for _, name := range Presets() {
		p, _ := LookupPreset(name)
		require.Len(t, want[name], len(p.Fake.Faults), name)
		for fault, kind := range want[name] {
			t.Run(name+"/"+string(fault), func(t *testing.T) {
				s, client, cp := compatFake(t, name, fakeprovider.Step{Fault: fault, RetryAfter: 1500 * time.Millisecond})
				_, err := client.Chat.Completions.New(t.Context(), newParams())
				var oe *sdk.Error
				require.True(t, errors.As(err, &oe), "%T %v", err, err)
				e := p.Fake.Faults[fault]
				assert.Equal(t, e.Status, oe.StatusCode)

				got, ok := Classifier.Classify(err, time.Now())
				require.True(t, ok)
				assert.Equal(t, kind, got.Kind)
				assert.Equal(t, kind != events.KindClient, got.Retryable)
				assert.Contains(t, got.Message, e.Message)
				if fault == fakekit.FaultRateLimit {
					assert.Equal(t, 1500*time.Millisecond, got.Hint)
					if o := cp.RateLimits(oe.Response.Header, time.Now()); len(p.Limits) > 0 {
						assert.True(t, o.HasRemaining[guard.Requests] && o.Remaining[guard.Requests] == 0, "the preset's requests remaining 0: %+v", o)
					}
				}
				wire := cp.ClassifyResponse(oe.StatusCode, oe.Response.Header, []byte(oe.RawJSON()), time.Now())
				assert.Equal(t, got.Kind, wire.Kind)
				assert.EqualValues(t, 1, s.Requests())
			})
		}
	}
}

// Mistral's fake streams the usage unasked, and refuses stream_options
// as Mistral does; its rate-limit headers are Mistral's.
func TestCompatFakeMistral(t *testing.T) {
	u := events.Usage{InputTokens: 40, OutputTokens: 7}
	_, client, cp := compatFake(t, "mistral", fakeprovider.Step{Fault: fakekit.FaultNone, Usage: u})
	stream := client.Chat.Completions.NewStreaming(t.Context(), newParams())
	var su StreamUsage
	for stream.Next() {
		su.Observe(stream.Current())
	}
	require.NoError(t, stream.Err())
	assert.True(t, su.Complete(), "the usage chunk came unasked")
	assert.Equal(t, u, su.Usage())

	_, client, _ = compatFake(t, "mistral", fakeprovider.Step{Fault: fakekit.FaultNone, Usage: u})
	params := newParams()
	params.StreamOptions.IncludeUsage = sdk.Bool(true)
	stream = client.Chat.Completions.NewStreaming(t.Context(), params)
	for stream.Next() {
	}
	var oe *sdk.Error
	require.ErrorAs(t, stream.Err(), &oe)
	assert.Contains(t, oe.Message, "Extra inputs are not permitted")

	h := http.Header{}
	cp.preset.fakeLimitHeaders(h, []fakekit.LimitState{
		{Dimension: fakekit.Dimension{Name: "requests", Limit: 720}, Remaining: 717},
		{Dimension: fakekit.Dimension{Name: "tokens", Limit: 5000000}, Remaining: 4999911},
	})
	o := cp.RateLimits(h, time.Now())
	assert.EqualValues(t, [4]int64{720, 0, 0, 5000000}, o.Limit)
	assert.EqualValues(t, 717, o.Remaining[0])
}
