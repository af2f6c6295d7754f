package e2e

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	asdk "github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	osdk "github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/agentledger/ledger/internal/gateway"
	pgemini "github.com/agentledger/ledger/internal/provider/gemini"
	"github.com/agentledger/ledger/internal/sim/fakeprovider"
	"github.com/agentledger/ledger/ledgertest"
)

// sdkClients are the official Go SDKs pointed at the gateway by base URL
// alone, with their own retries off (max_retries=0, P30).
type sdkClients struct {
	ant asdk.Client
	oai osdk.Client
	gem *genai.Client
}

func newSDKClients(t *testing.T, base string) *sdkClients {
	t.Helper()
	gem, err := genai.NewClient(t.Context(), pgemini.ClientConfig(&genai.ClientConfig{
		APIKey: "gem-key", Backend: genai.BackendGeminiAPI, HTTPOptions: genai.HTTPOptions{BaseURL: base},
	}))
	require.NoError(t, err)
	return &sdkClients{
		ant: asdk.NewClient(aoption.WithBaseURL(base), aoption.WithAPIKey("ant-key"), aoption.WithMaxRetries(0)),
		oai: osdk.NewClient(ooption.WithBaseURL(base+"/v1"), ooption.WithAPIKey("oai-key"), ooption.WithMaxRetries(0)),
		gem: gem,
	}
}

// sdkCall makes one call through an SDK, naming its session and request
// (ids); it reports whether the SDK saw the call succeed.
type sdkCall func(ctx context.Context, c *sdkClients, ids callIDs) bool

// callIDs are the session and request a call names in its headers.
type callIDs struct{ session, request string }

func (ids callIDs) anthropic() []aoption.RequestOption {
	return []aoption.RequestOption{aoption.WithHeader(gateway.HeaderSessionID, ids.session), aoption.WithHeader(gateway.HeaderRequestID, ids.request)}
}

func (ids callIDs) openai() []ooption.RequestOption {
	return []ooption.RequestOption{ooption.WithHeader(gateway.HeaderSessionID, ids.session), ooption.WithHeader(gateway.HeaderRequestID, ids.request)}
}

func (ids callIDs) gemini() *genai.GenerateContentConfig {
	h := http.Header{}
	h.Set(gateway.HeaderSessionID, ids.session)
	h.Set(gateway.HeaderRequestID, ids.request)
	return pgemini.GenerateContentConfig(&genai.GenerateContentConfig{HTTPOptions: &genai.HTTPOptions{Headers: h}})
}

const answer = "Simulated answer to "

var sdkCalls = map[string]sdkCall{
	"anthropic": func(ctx context.Context, c *sdkClients, ids callIDs) bool {
		msg, err := c.ant.Messages.New(ctx, anthropicParams(), ids.anthropic()...)
		return err == nil && strings.Contains(msg.Content[0].Text, answer)
	},
	"anthropic-stream": func(ctx context.Context, c *sdkClients, ids callIDs) bool {
		stream := c.ant.Messages.NewStreaming(ctx, anthropicParams(), ids.anthropic()...)
		defer stream.Close()
		var msg asdk.Message
		for stream.Next() {
			if msg.Accumulate(stream.Current()) != nil {
				return false
			}
		}
		return stream.Err() == nil && msg.StopReason != "" && strings.Contains(msg.Content[0].Text, answer)
	},
	"openai-chat": func(ctx context.Context, c *sdkClients, ids callIDs) bool {
		cc, err := c.oai.Chat.Completions.New(ctx, chatParams(), ids.openai()...)
		return err == nil && strings.Contains(cc.Choices[0].Message.Content, answer)
	},
	"openai-chat-stream": func(ctx context.Context, c *sdkClients, ids callIDs) bool {
		return chatStream(ctx, c, ids, chatParams())
	},
	"openai-chat-stream-with-usage": func(ctx context.Context, c *sdkClients, ids callIDs) bool {
		p := chatParams()
		p.StreamOptions = osdk.ChatCompletionStreamOptionsParam{IncludeUsage: osdk.Bool(true)}
		return chatStream(ctx, c, ids, p)
	},
	"openai-responses": func(ctx context.Context, c *sdkClients, ids callIDs) bool {
		r, err := c.oai.Responses.New(ctx, responsesParams(), ids.openai()...)
		return err == nil && strings.Contains(r.OutputText(), answer)
	},
	"openai-responses-stream": func(ctx context.Context, c *sdkClients, ids callIDs) bool {
		stream := c.oai.Responses.NewStreaming(ctx, responsesParams(), ids.openai()...)
		defer stream.Close()
		done := false
		for stream.Next() {
			done = done || stream.Current().Type == "response.completed"
		}
		return stream.Err() == nil && done
	},
	"openai-embeddings": func(ctx context.Context, c *sdkClients, ids callIDs) bool {
		e, err := c.oai.Embeddings.New(ctx, osdk.EmbeddingNewParams{Model: "text-embedding-3-small", Input: osdk.EmbeddingNewParamsInputUnion{OfString: osdk.String("hi")}},
			ids.openai()...)
		return err == nil && len(e.Data) == 1
	},
	"gemini": func(ctx context.Context, c *sdkClients, ids callIDs) bool {
		r, err := c.gem.Models.GenerateContent(ctx, "gemini-2.5-flash", genai.Text("hi"), ids.gemini())
		return err == nil && strings.Contains(r.Text(), answer)
	},
	"gemini-stream": func(ctx context.Context, c *sdkClients, ids callIDs) bool {
		finished := false
		for r, err := range c.gem.Models.GenerateContentStream(ctx, "gemini-2.5-flash", genai.Text("hi"), ids.gemini()) {
			if err != nil {
				return false
			}
			for _, cand := range r.Candidates {
				finished = finished || cand.FinishReason != ""
			}
		}
		return finished
	},
}

func anthropicParams() asdk.MessageNewParams {
	return asdk.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 2048, Messages: []asdk.MessageParam{asdk.NewUserMessage(asdk.NewTextBlock("hi"))}}
}

func chatParams() osdk.ChatCompletionNewParams {
	return osdk.ChatCompletionNewParams{Model: "gpt-4.1-mini", Messages: []osdk.ChatCompletionMessageParamUnion{osdk.UserMessage("hi")}}
}

func responsesParams() responses.ResponseNewParams {
	return responses.ResponseNewParams{Model: "gpt-4.1-mini", Input: responses.ResponseNewParamsInputUnion{OfString: osdk.String("hi")}}
}

func chatStream(ctx context.Context, c *sdkClients, ids callIDs, p osdk.ChatCompletionNewParams) bool {
	stream := c.oai.Chat.Completions.NewStreaming(ctx, p, ids.openai()...)
	defer stream.Close()
	var acc osdk.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	return stream.Err() == nil && len(acc.Choices) == 1 && strings.Contains(acc.Choices[0].Message.Content, answer)
}

// callsPerRoute is how many calls each route gets.
const callsPerRoute = 8

// The official Go SDKs through the gateway, every route, streaming and
// not, against the fake provider with every fault: the ledger equals the
// provider's truth to the token, and each client saw exactly the calls
// the provider answered successfully succeed.
func TestGatewayGoSDKsLedgerEqualsTruth(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Seed 12 gives every fault, Anthropic broken streams with output
	// after message_start, and OpenAI ones before their usage chunk.
	rig := startGatewayRig(t, 12, faultMix, rigPolicy())
	clients := newSDKClients(t, rig.url)

	succeeded := map[string]*atomic.Int64{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 12)
	for name, call := range sdkCalls {
		session := "go-" + name
		n := &atomic.Int64{}
		succeeded[session] = n // written here only: the calls add to n
		for i := range callsPerRoute {
			// Named requests, so that the seeded faults are the same on
			// every run.
			ids := callIDs{session: session, request: session + "-" + strconv.Itoa(i)}
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				if call(ctx, clients, ids) {
					n.Add(1)
				}
			})
		}
	}
	wg.Wait()
	require.NoError(t, ctx.Err())

	truth := rig.requireLedgerEqualsTruth(t)
	require.Len(t, truth.Sessions, len(sdkCalls))
	for session, n := range succeeded {
		tally := truth.Sessions[session]
		assert.Equal(t, int64(callsPerRoute), tally.Requests, "session %s: one request per call", session)
		assert.Equal(t, tally.RequestsSucceeded, n.Load(), "session %s: the SDK saw what the provider answered", session)
	}
	outcomes := truth.Total.Outcomes
	t.Logf("truth: %d requests, %d attempts, outcomes %v, billed %+v, unobservable %+v", truth.Total.Requests, truth.Total.Attempts, outcomes, truth.Total.Billed, truth.Total.Unobservable)
	for _, f := range []fakeprovider.Fault{fakeprovider.FaultRateLimit, fakeprovider.FaultOverload, fakeprovider.FaultServerError,
		fakeprovider.FaultBilledTimeout, fakeprovider.FaultBrokenStream, fakeprovider.FaultBadRequest} {
		assert.Positive(t, outcomes[f], "the faults include %s: %v", f, outcomes)
	}
	assert.Greater(t, truth.Total.Billed.InputTokens, truth.Total.Usage.InputTokens, "billed failed attempts show as overhead")
	assert.Positive(t, truth.Total.Unobservable.InputTokens, "broken OpenAI streams billed input no client could see")
	assert.Positive(t, truth.Total.Unobservable.OutputTokens, "broken Anthropic streams billed output no client could see")
}

// A client that retries on its own with the same Idempotency-Key (here
// the Anthropic SDK's own retries, left on) continues the request's
// attempts: one request in the ledger, its attempts numbered on.
func TestGatewayClientRetriesWithIdempotencyKey(t *testing.T) {
	rig := startGatewayRig(t, 12, fakeprovider.Mix{RateLimit: 0.3, Overload: 0.2, ServerError: 0.2}, rigPolicy())
	key := findRequestID(t, rig.fp.Plan(), "idem", 3) // the gateway's 3 attempts fail, the 4th succeeds
	client := asdk.NewClient(aoption.WithBaseURL(rig.url), aoption.WithAPIKey("k"), aoption.WithMaxRetries(2))
	var raw *http.Response
	msg, err := client.Messages.New(context.Background(), anthropicParams(),
		aoption.WithHeader(gateway.HeaderSessionID, "go-idem"), aoption.WithHeader(gateway.HeaderIdempotencyKey, key), aoption.WithResponseInto(&raw))
	require.NoError(t, err, "the SDK's retry reached the attempt that succeeds")
	assert.Contains(t, msg.Content[0].Text, key)
	assert.Equal(t, key, raw.Header.Get(gateway.HeaderRequestID))

	rig.requireLedgerEqualsTruth(t)
	req := rig.ledger.Request(t, key)
	assert.Equal(t, 4, req.Attempts, "3 attempts of the first call, 1 of the client's retry")
	assert.Equal(t, 3, req.WinningAttempt)
	assert.Equal(t, ledgertest.StatusSucceeded, req.Status)
	assert.Equal(t, int64(1), rig.ledger.Session(t, "go-idem").Requests)
}

// Issue 15 item 8, end to end: once the gateway's record of a request's
// attempt numbers is gone (here purged, as its TTL would expire it), a
// client's retry of the request continues from the ledger's record, so
// the ledger holds every attempt the provider saw (before, the retry
// started at 0 again and the ledger dropped its attempts as duplicates,
// so that the ledger missed attempts the provider billed).
func TestGatewayNumbersContinueFromTheLedger(t *testing.T) {
	rig := startGatewayRig(t, 12, fakeprovider.Mix{RateLimit: 0.3, Overload: 0.2, ServerError: 0.2}, rigPolicy())
	key := findRequestID(t, rig.fp.Plan(), "expired", 3) // the first attempts fail, a 4th succeeds
	client := asdk.NewClient(aoption.WithBaseURL(rig.url), aoption.WithAPIKey("k"), aoption.WithMaxRetries(0))
	call := func() error {
		_, err := client.Messages.New(context.Background(), anthropicParams(),
			aoption.WithHeader(gateway.HeaderSessionID, "go-expired"), aoption.WithHeader(gateway.HeaderIdempotencyKey, key))
		return err
	}
	require.Error(t, call(), "the first attempts fail")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, rig.pub.Flush(ctx))
	rig.ledger.WaitCaughtUp(t)
	first := rig.ledger.Request(t, key).Attempts
	require.NoError(t, rig.kv.Purge(ctx, key))

	_ = call() // whether it succeeds depends on how many attempts the first call made (a long retry-after ends it early)
	rig.requireLedgerEqualsTruth(t)
	assert.Greater(t, rig.ledger.Request(t, key).Attempts, first, "the retry's attempts are counted, not dropped as repeats")
}
