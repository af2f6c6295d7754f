package openai_test

import (
	"testing"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger"
	"github.com/agentledger/ledger/provider/openai"
)

func chatChunk(t *testing.T, data string) sdk.ChatCompletionChunk {
	t.Helper()
	var c sdk.ChatCompletionChunk
	require.NoError(t, c.UnmarshalJSON([]byte(data)))
	return c
}

func responseEvent(t *testing.T, data string) responses.ResponseStreamEventUnion {
	t.Helper()
	var ev responses.ResponseStreamEventUnion
	require.NoError(t, ev.UnmarshalJSON([]byte(data)))
	return ev
}

// The adapter's stream followers estimate the input of a stream whose
// usage never came, from the request they were made with; the zero value
// (the API before issue 19) estimates nothing, and an estimate is never
// the usage's input.
func TestStreamUsageReportsTheEstimatedInput(t *testing.T) {
	chat := sdk.ChatCompletionNewParams{Model: "gpt-4o", Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("hello")}}        // 3+1+1+3
	resp := responses.ResponseNewParams{Model: "gpt-5", Input: responses.ResponseNewParamsInputUnion{OfString: sdk.String("hello world")}} // 3+1+2+3
	const (
		content = `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hi"}}]}`
		usage   = `{"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":8,"completion_tokens":1,"total_tokens":9}}`
		delta   = `{"type":"response.output_text.delta","delta":"Hi","item_id":"m","output_index":0,"content_index":0,"sequence_number":1}`
		done    = `{"type":"response.completed","sequence_number":2,"response":{"id":"r","usage":{"input_tokens":9,"output_tokens":1,"total_tokens":10,"input_tokens_details":{"cached_tokens":0},"output_tokens_details":{"reasoning_tokens":0}}}}`
		failed  = `{"type":"error","message":"overloaded","sequence_number":1}`
	)
	for _, tc := range []struct {
		name       string
		follower   string // "chat", "zero" (a zero StreamUsage), "responses"
		data       []string
		input, est int64
	}{
		{"chat cut before its usage", "chat", []string{content}, 0, 8},
		{"chat with its usage", "chat", []string{content, usage}, 8, 0},
		{"chat: no chunk at all", "chat", nil, 0, 0},
		{"chat: the zero value estimates nothing", "zero", []string{content}, 0, 0},
		{"responses cut before completed", "responses", []string{delta}, 0, 9},
		{"responses completed", "responses", []string{delta, done}, 9, 0},
		{"responses: an error and nothing else", "responses", []string{failed}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f interface {
				Report() ledger.Report
				Complete() bool
			}
			switch tc.follower {
			case "chat", "zero":
				s := openai.NewStreamUsage(chat)
				if tc.follower == "zero" {
					s = &openai.StreamUsage{}
				}
				for _, d := range tc.data {
					s.Observe(chatChunk(t, d))
				}
				f = s
			case "responses":
				s := openai.NewResponseStreamUsage(resp)
				for _, d := range tc.data {
					s.Observe(responseEvent(t, d))
				}
				f = s
			}
			r := f.Report()
			assert.Equal(t, tc.input, r.Usage.InputTokens)
			assert.Equal(t, tc.est, r.EstimatedInputTokens)
			assert.Equal(t, tc.input > 0, f.Complete())
		})
	}
}

func TestEstimateResponseInput(t *testing.T) {
	e, err := openai.EstimateResponseInput(responses.ResponseNewParams{
		Model: "gpt-4.1", Instructions: sdk.String("Say hello."),
		Input: responses.ResponseNewParamsInputUnion{OfString: sdk.String("hello")},
	})
	require.NoError(t, err)
	assert.Equal(t, openai.Estimate{Tokens: (3 + 1 + 3) + (3 + 1 + 1) + 3, Encoding: "o200k_base"}, e)
}
