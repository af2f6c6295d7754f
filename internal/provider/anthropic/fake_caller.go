package anthropic

import (
	"context"
	"fmt"
	"net/http"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/agentledger/ledger/internal/provider/fakekit"
	"github.com/agentledger/ledger/internal/retry"
)

// fakeCaller streams a message: a stream that fails after message_start
// still reports the input it was billed for.
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
	stream := c.client.Messages.NewStreaming(ctx, sdk.MessageNewParams{
		Model:     sdk.Model(c.model),
		MaxTokens: c.maxTokens,
		Messages:  []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock(prompt))},
	}, opts...)
	defer stream.Close()
	var usage StreamUsage
	var msg sdk.Message
	var accErr error
	for stream.Next() {
		ev := stream.Current()
		usage.Observe(ev)
		if accErr == nil {
			accErr = msg.Accumulate(ev)
		}
	}
	rep := retry.Report{Usage: usage.Usage(), ServiceTier: usage.ServiceTier()}
	if raw != nil {
		rep.ProviderRequestID = RequestID(raw.Header)
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
