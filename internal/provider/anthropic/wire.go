package anthropic

import (
	"encoding/json"
	"net/http"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/retry"
)

// This file serves callers that see the HTTP exchange itself rather than
// the SDK's types (the gateway): the same classification and usage rules,
// applied to status, headers and raw JSON.

// ClassifyResponse classifies an HTTP error response of the API (status,
// headers and body) exactly as Classify classifies the *anthropic.Error
// the SDK makes of it.
func ClassifyResponse(status int, header http.Header, body []byte, now time.Time) retry.Classification {
	ae := &sdk.Error{StatusCode: status, Response: &http.Response{StatusCode: status, Header: header}}
	if header != nil {
		ae.RequestID = header.Get(RequestIDHeader)
	}
	_ = ae.UnmarshalJSON(body) // a body that is not JSON leaves the fields empty, as in the SDK
	c, _ := Classify(ae, now)
	return c
}

// ClassifyStreamError classifies the data of an error event inside a
// stream whose response had header, as Classify classifies the SDK's
// error for it: by its error type, with Status 0.
func ClassifyStreamError(header http.Header, data []byte, now time.Time) retry.Classification {
	ae := &sdk.Error{StatusCode: http.StatusOK, Response: &http.Response{StatusCode: http.StatusOK, Header: header}}
	if header != nil {
		ae.RequestID = header.Get(RequestIDHeader)
	}
	_ = ae.UnmarshalJSON(data)
	c, _ := Classify(ae, now)
	return c
}

// wireUsage is the API's usage object; a count it omits is nil.
type wireUsage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheCreation            *struct {
		Ephemeral5mInputTokens int64 `json:"ephemeral_5m_input_tokens"`
		Ephemeral1hInputTokens int64 `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
	OutputTokensDetails *struct {
		ThinkingTokens *int64 `json:"thinking_tokens"`
	} `json:"output_tokens_details"`
	ServiceTier string `json:"service_tier"`
}

// MessageUsage reads the usage of a Messages API response body (a
// message object) in the contract's terms (see UsageOf), and the service
// tier it names; ok is false when the body has no usage object.
func MessageUsage(body []byte) (u events.Usage, tier string, ok bool) {
	var m struct {
		Usage *wireUsage `json:"usage"`
	}
	if json.Unmarshal(body, &m) != nil || m.Usage == nil {
		return events.Usage{}, "", false
	}
	var s StreamUsage
	s.takeStart(m.Usage)
	return s.Usage(), s.ServiceTier(), true
}

// ObserveRaw takes one event of a message stream into account as it came
// over the wire: its event name (the SSE "event:" field, or "" to use the
// data's "type") and its data. It follows the same rules as Observe. It
// returns an error only for the data of a message_start or message_delta
// that is not JSON; events it does not need are not decoded.
func (s *StreamUsage) ObserveRaw(name string, data []byte) error {
	if name == "" {
		var t struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(data, &t); err != nil {
			return nil // not an event whose usage counts
		}
		name = t.Type
	}
	switch name {
	case "message_start":
		var ev struct {
			Message struct {
				Usage wireUsage `json:"usage"`
			} `json:"message"`
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			return err
		}
		s.takeStart(&ev.Message.Usage)
	case "message_delta":
		var ev struct {
			Usage wireUsage `json:"usage"`
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			return err
		}
		s.takeDelta(&ev.Usage)
	}
	return nil
}

// takeStart takes the counts of message_start (or of a whole message).
func (s *StreamUsage) takeStart(u *wireUsage) {
	s.c = counts{input: value(u.InputTokens), output: value(u.OutputTokens),
		cacheRead: value(u.CacheReadInputTokens), cacheCreation: value(u.CacheCreationInputTokens)}
	if cc := u.CacheCreation; cc != nil {
		s.c.cache1h, s.c.cache5m = cc.Ephemeral1hInputTokens, cc.Ephemeral5mInputTokens
	}
	if d := u.OutputTokensDetails; d != nil {
		s.c.thinking = value(d.ThinkingTokens)
	}
	s.tier = u.ServiceTier
}

// takeDelta takes the counts of a message_delta: the cumulative output
// (and its thinking part), and the input counts it carries (those it
// omits keep their value).
func (s *StreamUsage) takeDelta(u *wireUsage) {
	var thinking *int64
	if u.OutputTokensDetails != nil {
		thinking = u.OutputTokensDetails.ThinkingTokens
	}
	for _, f := range []struct {
		dst *int64
		src *int64
	}{{&s.c.output, u.OutputTokens}, {&s.c.input, u.InputTokens}, {&s.c.cacheRead, u.CacheReadInputTokens},
		{&s.c.cacheCreation, u.CacheCreationInputTokens}, {&s.c.thinking, thinking}} {
		if f.src != nil {
			*f.dst = *f.src
		}
	}
}

func value(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
