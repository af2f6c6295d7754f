package openai

import (
	"context"
	"net/http"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentledger/ledger/internal/provider/fakekit"
	"github.com/agentledger/ledger/internal/retry"
)

// fakeCaller creates a chat completion; a failed one reports no usage.
type fakeCaller struct {
	client    sdk.Client
	model     string
	maxTokens int64
}

func newFakeCaller(_ context.Context, cfg fakekit.ClientConfig) (fakekit.Caller, error) {
	client := sdk.NewClient(append([]option.RequestOption{
		option.WithBaseURL(cfg.BaseURL),
		option.WithAPIKey(cfg.APIKey),
		option.WithHTTPClient(cfg.HTTPClient),
	}, ClientOptions()...)...)
	return &fakeCaller{client: client, model: cfg.Model, maxTokens: cfg.MaxTokens}, nil
}

func (c *fakeCaller) Call(ctx context.Context, prompt string, a retry.Attempt) (retry.Report, error) {
	var raw *http.Response
	opts := []option.RequestOption{option.WithResponseInto(&raw)}
	for k, v := range fakekit.LedgerHeaders(a) {
		opts = append(opts, option.WithHeader(k, v[0]))
	}
	cc, err := c.client.Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{
		Model:               c.model,
		MaxCompletionTokens: sdk.Int(c.maxTokens),
		Messages:            []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage(prompt)},
	}, opts...)
	var rep retry.Report
	if raw != nil {
		rep.ProviderRequestID = RequestID(raw.Header)
		rep.Header = raw.Header
	}
	if err != nil {
		return rep, err
	}
	rep.Usage, rep.ServiceTier = UsageOf(cc.Usage), ServiceTierOf(cc.ServiceTier)
	return rep, nil
}
