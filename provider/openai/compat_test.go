package openai_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger"
	"github.com/agentledger/ledger/ledgertest"
	"github.com/agentledger/ledger/provider/openai"
)

// TestCompatibleMiddleware: a call recorded under a compatible upstream's
// name is accepted by a middleware built without WithClassifiers, and
// its Mistral 429 "capacity exceeded" is retried as an overload; a name
// no Compatible registered is refused, as any unknown provider.
func TestCompatibleMiddleware(t *testing.T) {
	var n atomic.Int64
	mistral := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if n.Add(1) == 1 {
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"object":"error","message":"Service tier capacity exceeded for this model.","type":"service_tier_capacity_exceeded","param":null,"code":"3505"}`)
			return
		}
		fmt.Fprint(w, `{"id":"c1","object":"chat.completion","created":1,"model":"mistral-small-latest","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}`)
	}))
	defer mistral.Close()

	up, err := openai.Compatible("mistral", openai.WithBaseURL(mistral.URL+"/v1"))
	require.NoError(t, err)
	l := ledgertest.Start(t)
	mw, err := ledger.NewMiddleware(l.Publisher(t), ledger.WithPolicy(ledger.Policy{
		MaxRetries: 2, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond, HintCap: time.Second, AttemptTimeout: 5 * time.Second,
	}))
	require.NoError(t, err)
	client := sdk.NewClient(append([]option.RequestOption{option.WithAPIKey("k")}, up.ClientOptions()...)...)

	call := ledger.Call{SessionID: "s-compat", Provider: up.Name(), Model: "mistral-small-latest"}
	res, err := ledger.DoResult(context.Background(), mw, call, func(ctx context.Context, _ ledger.Attempt) (string, ledger.Report, error) {
		cc, err := client.Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{Model: call.Model, Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("hi")}})
		if err != nil {
			return "", ledger.Report{}, err
		}
		return cc.Choices[0].Message.Content, ledger.Report{Usage: openai.UsageOf(cc.Usage)}, nil
	})
	require.NoError(t, err)
	assert.Equal(t, "hi", res.Value)
	r := l.WaitRequest(t, res.RequestID)
	assert.Equal(t, "mistral", r.Provider)
	assert.EqualValues(t, 2, r.Attempts)
	assert.EqualValues(t, 12, r.Usage.InputTokens)

	_, err = ledger.Do(context.Background(), mw, ledger.Call{SessionID: "s-compat", Provider: "never-registered", Model: "m"},
		func(context.Context, ledger.Attempt) (string, ledger.Report, error) { return "", ledger.Report{}, nil })
	assert.True(t, errors.Is(err, ledger.ErrNoClassifier), "%v", err)
}

func TestCompatibleRefuses(t *testing.T) {
	tests := []struct {
		name string
		opts []openai.CompatOption
		want string
	}{
		{"Mistral", nil, "name: \"Mistral\" must be"},
		{"corp", nil, "WithBaseURL: required for \"corp\""},
		{"corp", []openai.CompatOption{openai.WithBaseURL("llm.corp/v1")}, "must be an absolute http(s) URL"},
		{"lab", []openai.CompatOption{openai.WithPreset("llamacpp")}, "preset: \"llamacpp\" is not one of mistral, groq"},
	}
	for _, tt := range tests {
		_, err := openai.Compatible(tt.name, tt.opts...)
		require.Error(t, err, tt.name)
		assert.Contains(t, err.Error(), tt.want)
	}
	up, err := openai.Compatible("lab", openai.WithPreset("vllm"), openai.WithBaseURL("http://10.0.0.5:8000/v1"))
	require.NoError(t, err)
	assert.Equal(t, "http://10.0.0.5:8000/v1/", up.BaseURL())
	up, err = openai.Compatible("groq")
	require.NoError(t, err)
	assert.Equal(t, "https://api.groq.com/openai/v1/", up.BaseURL())
}
