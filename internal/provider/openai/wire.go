package openai

import (
	"encoding/json"
	"net/http"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/retry"
)

// This file serves callers that see the HTTP exchange itself rather than
// the SDK's types (the gateway): the same classification and usage rules,
// applied to status, headers and raw JSON.

// ClassifyResponse classifies an HTTP error response of the API (status,
// headers and body) exactly as Classify classifies the *openai.Error the
// SDK makes of it.
func ClassifyResponse(status int, header http.Header, body []byte, now time.Time) retry.Classification {
	oe := &sdk.Error{StatusCode: status, Response: &http.Response{StatusCode: status, Header: header}}
	var wrapper struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &wrapper) == nil && len(wrapper.Error) > 0 && wrapper.Error[0] == '{' {
		_ = oe.UnmarshalJSON(wrapper.Error) // as the SDK does; a bad object leaves the fields empty
	}
	c, _ := Classify(oe, now)
	return c
}

// ClassifyStreamError classifies the data of an error inside a stream,
// as Classify classifies the SDK's error for it (Status 0): a chat chunk
// with an "error" object, a Responses API "error" event (code and message
// at the top) or a "response.failed" event (the response's error).
func ClassifyStreamError(data []byte) retry.Classification {
	var ev struct {
		Type     string          `json:"type"`
		Error    json.RawMessage `json:"error"`
		Code     json.RawMessage `json:"code"`
		Message  string          `json:"message"`
		Response struct {
			Error json.RawMessage `json:"error"`
		} `json:"response"`
	}
	_ = json.Unmarshal(data, &ev)
	var inner any
	switch {
	case len(ev.Error) > 0:
		inner = ev.Error
	case ev.Type == "error":
		inner = map[string]any{"code": ev.Code, "message": ev.Message}
	case len(ev.Response.Error) > 0:
		inner = ev.Response.Error
	}
	if inner != nil {
		if b, err := json.Marshal(map[string]any{"error": inner}); err == nil {
			data = b
		}
	}
	c, _ := Classify(&ssestream.StreamError{Message: "error event in stream", Event: ssestream.Event{Data: data}}, time.Time{})
	return c
}

// wireChatUsage is the usage object of Chat Completions and Embeddings.
type wireChatUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	PromptTokensDetails struct {
		CachedTokens     int64 `json:"cached_tokens"`
		CacheWriteTokens int64 `json:"cache_write_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

func (u *wireChatUsage) usage() events.Usage {
	var su sdk.CompletionUsage
	su.PromptTokens, su.CompletionTokens = u.PromptTokens, u.CompletionTokens
	su.PromptTokensDetails.CachedTokens = u.PromptTokensDetails.CachedTokens
	su.PromptTokensDetails.CacheWriteTokens = u.PromptTokensDetails.CacheWriteTokens
	su.CompletionTokensDetails.ReasoningTokens = u.CompletionTokensDetails.ReasoningTokens
	return UsageOf(su)
}

// ChatUsage reads the usage of a chat completion response body, as
// UsageOf, and its service tier (ServiceTierOf); ok is false when the body
// has no usage.
func ChatUsage(body []byte) (u events.Usage, tier string, ok bool) {
	return bodyUsage[wireChatUsage](body)
}

// bodyUsage reads the "usage" member of a response body as a W, and the
// body's service_tier.
func bodyUsage[W any, P interface {
	*W
	usage() events.Usage
}](body []byte) (events.Usage, string, bool) {
	var r struct {
		Usage       P      `json:"usage"`
		ServiceTier string `json:"service_tier"`
	}
	if json.Unmarshal(body, &r) != nil || r.Usage == nil {
		return events.Usage{}, "", false
	}
	return r.Usage.usage(), ServiceTierOf(r.ServiceTier), true
}

// EmbeddingUsage reads the usage of an embeddings response body: its
// prompt_tokens are input, and an embedding has no output.
func EmbeddingUsage(body []byte) (events.Usage, bool) {
	u, _, ok := ChatUsage(body)
	u.OutputTokens, u.ReasoningTokens = 0, 0
	return u, ok
}

// wireResponseUsage is the usage object of the Responses API.
type wireResponseUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	OutputTokens       int64 `json:"output_tokens"`
	InputTokensDetails struct {
		CachedTokens     int64 `json:"cached_tokens"`
		CacheWriteTokens int64 `json:"cache_write_tokens"`
	} `json:"input_tokens_details"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
}

func (u *wireResponseUsage) usage() events.Usage {
	var ru responses.ResponseUsage
	ru.InputTokens, ru.OutputTokens = u.InputTokens, u.OutputTokens
	ru.InputTokensDetails.CachedTokens = u.InputTokensDetails.CachedTokens
	ru.InputTokensDetails.CacheWriteTokens = u.InputTokensDetails.CacheWriteTokens
	ru.OutputTokensDetails.ReasoningTokens = u.OutputTokensDetails.ReasoningTokens
	return ResponseUsageOf(ru)
}

// ResponseBodyUsage reads the usage of a Responses API response body, as
// ResponseUsageOf, and its service tier (ServiceTierOf); ok is false when
// the body has no usage.
func ResponseBodyUsage(body []byte) (u events.Usage, tier string, ok bool) {
	return bodyUsage[wireResponseUsage](body)
}

// wireChunk is the part of a chat completion chunk that StreamUsage reads.
type wireChunk struct {
	Choices []struct {
		Delta struct {
			Content      string            `json:"content"`
			Refusal      string            `json:"refusal"`
			ToolCalls    []json.RawMessage `json:"tool_calls"`
			FunctionCall struct {
				Arguments string `json:"arguments"`
			} `json:"function_call"`
		} `json:"delta"`
	} `json:"choices"`
	Usage       *wireChatUsage `json:"usage"`
	ServiceTier string         `json:"service_tier"`
}

// ObserveRaw takes one chunk of the stream into account as it came over
// the wire (the data of one event, not "[DONE]"), as Observe. usageOnly
// reports a chunk that carries the usage and no choice: the chunk
// stream_options.include_usage adds at the end.
func (s *StreamUsage) ObserveRaw(data []byte) (usageOnly bool, err error) {
	var c wireChunk
	if err := json.Unmarshal(data, &c); err != nil {
		return false, err
	}
	if c.Usage != nil {
		s.usage, s.final = c.Usage.usage(), true
	}
	s.takeTier(c.ServiceTier)
	for _, ch := range c.Choices {
		d := &ch.Delta
		if d.Content != "" || d.Refusal != "" || len(d.ToolCalls) > 0 || d.FunctionCall.Arguments != "" {
			s.chunks++
		}
	}
	return c.Usage != nil && len(c.Choices) == 0, nil
}

// ObserveRaw takes one event of a Responses API stream into account as it
// came over the wire: its SSE event name ("" to use the data's "type") and
// its data, as Observe.
func (s *ResponseStreamUsage) ObserveRaw(name string, data []byte) error {
	if name == "" {
		var t struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(data, &t); err != nil {
			return err
		}
		name = t.Type
	}
	switch {
	case endsResponse(name) || carriesResponse(name):
		var ev struct {
			Response struct {
				Usage       *wireResponseUsage `json:"usage"`
				ServiceTier string             `json:"service_tier"`
			} `json:"response"`
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			return err
		}
		s.takeTier(ev.Response.ServiceTier)
		if ev.Response.Usage != nil && endsResponse(name) {
			s.usage, s.final = ev.Response.Usage.usage(), true
		}
	case countsAsOutput(name):
		s.deltas++
	}
	return nil
}
