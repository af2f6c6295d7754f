package gemini

import (
	"context"
	"fmt"

	"google.golang.org/genai"

	"github.com/agentledger/ledger/internal/provider/fakekit"
	"github.com/agentledger/ledger/internal/retry"
)

// fakeCaller streams generateContent: every chunk carries the usage so
// far, so a stream that stalls after its first chunk reports the input.
type fakeCaller struct {
	client    *genai.Client
	model     string
	maxTokens int32
}

func newFakeCaller(ctx context.Context, cfg fakekit.ClientConfig) (fakekit.Caller, error) {
	client, err := genai.NewClient(ctx, ClientConfig(&genai.ClientConfig{
		APIKey:      cfg.APIKey,
		Backend:     genai.BackendGeminiAPI,
		HTTPClient:  cfg.HTTPClient,
		HTTPOptions: genai.HTTPOptions{BaseURL: cfg.BaseURL},
	}))
	if err != nil {
		return nil, fmt.Errorf("sim: gemini client: %w", err)
	}
	return &fakeCaller{client: client, model: cfg.Model, maxTokens: int32(min(cfg.MaxTokens, 1<<31-1))}, nil
}

func (c *fakeCaller) Call(ctx context.Context, prompt string, a retry.Attempt) (retry.Report, error) {
	cfg := GenerateContentConfig(&genai.GenerateContentConfig{
		MaxOutputTokens: c.maxTokens,
		HTTPOptions:     &genai.HTTPOptions{Headers: fakekit.LedgerHeaders(a)},
	})
	var usage StreamUsage
	var rep retry.Report
	finished := false
	for resp, err := range c.client.Models.GenerateContentStream(ctx, c.model, genai.Text(prompt), cfg) {
		if err != nil {
			rep.Usage = usage.Usage()
			return rep, err
		}
		usage.Observe(resp)
		if id := RequestID(resp); id != "" {
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
