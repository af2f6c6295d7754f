package sim

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	asdk "github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	osdk "github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"

	panthropic "github.com/agentledger/ledger/internal/provider/anthropic"
	pgemini "github.com/agentledger/ledger/internal/provider/gemini"
	popenai "github.com/agentledger/ledger/internal/provider/openai"
	"github.com/agentledger/ledger/internal/retry"
	"github.com/agentledger/ledger/internal/sim/fakeprovider"
)

// classifier recognises the errors of every SDK the fleet uses.
var classifier = retry.Chain{panthropic.Classifier, popenai.Classifier, pgemini.Classifier}

// caller makes one attempt of a call with one provider's SDK client. It
// reports what the provider billed, on error too. Implementations are safe
// for concurrent use.
type caller interface {
	call(ctx context.Context, prompt string, a retry.Attempt) (retry.Report, error)
}

// ledgerHeaders are the fake provider's headers naming the attempt.
func ledgerHeaders(a retry.Attempt) [3][2]string {
	return [3][2]string{
		{fakeprovider.HeaderSessionID, a.SessionID},
		{fakeprovider.HeaderRequestID, a.RequestID},
		{fakeprovider.HeaderAttempt, strconv.Itoa(a.Number)},
	}
}

// newCallers builds the SDK client of every provider, pointed at the fake
// server whose root URL is root, with the SDK's retries off.
func newCallers(ctx context.Context, root string, hc *http.Client) (map[string]caller, error) {
	ant := asdk.NewClient(append([]aoption.RequestOption{
		aoption.WithBaseURL(fakeprovider.BaseURLOf(root, fakeprovider.Anthropic)),
		aoption.WithAPIKey("sim-key"),
		aoption.WithHTTPClient(hc),
	}, panthropic.ClientOptions()...)...)
	oai := osdk.NewClient(append([]ooption.RequestOption{
		ooption.WithBaseURL(fakeprovider.BaseURLOf(root, fakeprovider.OpenAI)),
		ooption.WithAPIKey("sim-key"),
		ooption.WithHTTPClient(hc),
	}, popenai.ClientOptions()...)...)
	gem, err := genai.NewClient(ctx, pgemini.ClientConfig(&genai.ClientConfig{
		APIKey:      "sim-key",
		Backend:     genai.BackendGeminiAPI,
		HTTPClient:  hc,
		HTTPOptions: genai.HTTPOptions{BaseURL: fakeprovider.BaseURLOf(root, fakeprovider.Gemini)},
	}))
	if err != nil {
		return nil, fmt.Errorf("sim: gemini client: %w", err)
	}
	return map[string]caller{
		fakeprovider.Anthropic: &anthropicCaller{client: ant, model: Model(fakeprovider.Anthropic)},
		fakeprovider.OpenAI:    &openaiCaller{client: oai, model: Model(fakeprovider.OpenAI)},
		fakeprovider.Gemini:    &geminiCaller{client: gem, model: Model(fakeprovider.Gemini)},
	}, nil
}

// anthropicCaller streams a message: a stream that fails after
// message_start still reports the input it was billed for.
type anthropicCaller struct {
	client asdk.Client
	model  string
}

func (c *anthropicCaller) call(ctx context.Context, prompt string, a retry.Attempt) (retry.Report, error) {
	var raw *http.Response
	opts := []aoption.RequestOption{aoption.WithResponseInto(&raw)}
	for _, h := range ledgerHeaders(a) {
		opts = append(opts, aoption.WithHeader(h[0], h[1]))
	}
	stream := c.client.Messages.NewStreaming(ctx, asdk.MessageNewParams{
		Model:     asdk.Model(c.model),
		MaxTokens: MaxTokens,
		Messages:  []asdk.MessageParam{asdk.NewUserMessage(asdk.NewTextBlock(prompt))},
	}, opts...)
	defer stream.Close()
	var usage panthropic.StreamUsage
	var msg asdk.Message
	var accErr error
	for stream.Next() {
		ev := stream.Current()
		usage.Observe(ev)
		if accErr == nil {
			accErr = msg.Accumulate(ev)
		}
	}
	rep := retry.Report{Usage: usage.Usage()}
	if raw != nil {
		rep.ProviderRequestID = panthropic.RequestID(raw.Header)
		rep.Header = raw.Header
	}
	if err := stream.Err(); err != nil {
		return rep, err
	}
	if accErr != nil {
		return rep, fmt.Errorf("sim: anthropic stream: %w", accErr)
	}
	if msg.StopReason == "" {
		return rep, fmt.Errorf("sim: anthropic stream ended without message_stop")
	}
	return rep, nil
}

// openaiCaller creates a chat completion; a failed one reports no usage.
type openaiCaller struct {
	client osdk.Client
	model  string
}

func (c *openaiCaller) call(ctx context.Context, prompt string, a retry.Attempt) (retry.Report, error) {
	var raw *http.Response
	opts := []ooption.RequestOption{ooption.WithResponseInto(&raw)}
	for _, h := range ledgerHeaders(a) {
		opts = append(opts, ooption.WithHeader(h[0], h[1]))
	}
	cc, err := c.client.Chat.Completions.New(ctx, osdk.ChatCompletionNewParams{
		Model:               c.model,
		MaxCompletionTokens: osdk.Int(MaxTokens),
		Messages:            []osdk.ChatCompletionMessageParamUnion{osdk.UserMessage(prompt)},
	}, opts...)
	var rep retry.Report
	if raw != nil {
		rep.ProviderRequestID = popenai.RequestID(raw.Header)
		rep.Header = raw.Header
	}
	if err != nil {
		return rep, err
	}
	rep.Usage = popenai.UsageOf(cc.Usage)
	return rep, nil
}

// geminiCaller streams generateContent: every chunk carries the usage so
// far, so a stream that stalls after its first chunk reports the input.
type geminiCaller struct {
	client *genai.Client
	model  string
}

func (c *geminiCaller) call(ctx context.Context, prompt string, a retry.Attempt) (retry.Report, error) {
	h := http.Header{}
	for _, kv := range ledgerHeaders(a) {
		h.Set(kv[0], kv[1])
	}
	cfg := pgemini.GenerateContentConfig(&genai.GenerateContentConfig{
		MaxOutputTokens: MaxTokens,
		HTTPOptions:     &genai.HTTPOptions{Headers: h},
	})
	var usage pgemini.StreamUsage
	var rep retry.Report
	finished := false
	for resp, err := range c.client.Models.GenerateContentStream(ctx, c.model, genai.Text(prompt), cfg) {
		if err != nil {
			rep.Usage = usage.Usage()
			return rep, err
		}
		usage.Observe(resp)
		if id := pgemini.RequestID(resp); id != "" {
			rep.ProviderRequestID = id
		}
		for _, cand := range resp.Candidates {
			finished = finished || cand.FinishReason != ""
		}
	}
	rep.Usage = usage.Usage()
	if !finished {
		return rep, fmt.Errorf("sim: gemini stream ended without a finish reason")
	}
	return rep, nil
}
