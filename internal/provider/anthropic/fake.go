package anthropic

import (
	"encoding/json"
	"net/http"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/provider/fakekit"
)

// Fake is the provider's fake dialect (fakekit.Faker): FakeDialect.
func (Provider) Fake() *fakekit.Dialect { return FakeDialect() }

// FakeDialect is the Messages API as the fake provider speaks it, under
// /anthropic (the SDK's base URL is the fake provider's URL and
// /anthropic/): answers and streams with the usage object's input that
// excludes the cache tokens, message_start reporting the input, error
// bodies of type "error", 529 for an overload, the
// anthropic-ratelimit-<dimension>-{limit,remaining,reset} headers the
// guards read (reset an RFC 3339 time), and
// separate input and output token limits. Its Sim drives the SDK's
// streaming Messages.NewStreaming.
func FakeDialect() *fakekit.Dialect {
	return &fakekit.Dialect{
		Provider:     Name,
		Prefix:       "/" + Name,
		BasePath:     "/",
		Endpoints:    []fakekit.Endpoint{{Path: "/v1/messages", Handle: fakeMessages}},
		Limits:       fakekit.SplitLimits,
		LimitHeaders: fakekit.LimitHeadersOf(rateLimitHeaders),
		CacheWrites:  true,
		// The 1-hour cache write, thinking and the tier in the usage.
		CacheWrites1h: true,
		Reasoning:     true,
		ServiceTiers:  fakeTiers,
		Sim:           &fakekit.Sim{Model: "claude-sonnet-4-5", Order: 0, NewCaller: newFakeCaller, Classifier: Classifier},
	}
}

// fakeTiers are the service tiers the fake's answers name.
var fakeTiers = []string{"standard", "priority"}

// fakeRequest is the part of a Messages API request the fake reads.
type fakeRequest struct {
	Model     string            `json:"model"`
	MaxTokens int64             `json:"max_tokens"`
	Messages  []json.RawMessage `json:"messages"`
	Stream    bool              `json:"stream"`
}

// fakeUsage is the Messages API usage object. input_tokens excludes the
// cache tokens, unlike the contract's InputTokens; cache_creation splits
// the write by lifetime, output_tokens_details.thinking_tokens is the
// thinking part of the output, service_tier the tier that served it.
type fakeUsage struct {
	InputTokens              int64  `json:"input_tokens"`
	OutputTokens             int64  `json:"output_tokens"`
	CacheCreationInputTokens int64  `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64  `json:"cache_read_input_tokens"`
	CacheCreation            any    `json:"cache_creation"`
	OutputTokensDetails      any    `json:"output_tokens_details"`
	ServiceTier              string `json:"service_tier,omitempty"`
}

func toFakeUsage(c fakekit.Call, u events.Usage) fakeUsage {
	return fakeUsage{
		InputTokens:              u.InputTokens - u.CacheReadInputTokens - u.CacheCreationInputTokens,
		OutputTokens:             u.OutputTokens,
		CacheCreationInputTokens: u.CacheCreationInputTokens,
		CacheReadInputTokens:     u.CacheReadInputTokens,
		CacheCreation: map[string]int64{
			"ephemeral_5m_input_tokens": u.CacheCreationInputTokens - u.CacheCreation1hInputTokens,
			"ephemeral_1h_input_tokens": u.CacheCreation1hInputTokens,
		},
		OutputTokensDetails: map[string]int64{"thinking_tokens": u.ReasoningTokens},
		ServiceTier:         fakekit.ServiceTierFor(c.RequestID, fakeTiers),
	}
}

type fakeMessage struct {
	ID           string           `json:"id"`
	Type         string           `json:"type"`
	Role         string           `json:"role"`
	Model        string           `json:"model"`
	Content      []map[string]any `json:"content"`
	StopReason   *string          `json:"stop_reason"`
	StopSequence *string          `json:"stop_sequence"`
	Usage        fakeUsage        `json:"usage"`
}

// fakeReply answers one attempt of a Messages request.
type fakeReply struct {
	model     string
	maxTokens int64
	stream    bool
}

// fakeMessages serves POST /v1/messages.
func fakeMessages(s fakekit.Server, w http.ResponseWriter, r *http.Request) {
	c, err := s.Identify(r)
	if err != nil {
		s.Unidentified()
		fakeError(w, "", http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	if r.Header.Get("X-Api-Key") == "" && r.Header.Get("Authorization") == "" {
		s.Invalid(c, "")
		fakeError(w, fakekit.RequestID("req_", c), http.StatusUnauthorized, "authentication_error", "x-api-key header is required")
		return
	}
	var req fakeRequest
	if err := fakekit.DecodeBody(w, r, &req); err != nil {
		s.Invalid(c, "")
		fakeError(w, fakekit.RequestID("req_", c), http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	if msg := req.validate(); msg != "" {
		s.Invalid(c, req.Model)
		fakeError(w, fakekit.RequestID("req_", c), http.StatusBadRequest, "invalid_request_error", msg)
		return
	}
	s.Serve(w, r, c, fakekit.Attempt{
		Model: req.Model, Stream: req.Stream, MaxOutput: req.MaxTokens,
		Reply: fakeReply{model: req.Model, maxTokens: req.MaxTokens, stream: req.Stream},
	})
}

func (q *fakeRequest) validate() string {
	switch {
	case q.Model == "":
		return "model: Field required"
	case q.MaxTokens < 1:
		return "max_tokens: must be at least 1"
	case len(q.Messages) == 0:
		return "messages: at least one message is required"
	}
	return ""
}

func fakeError(w http.ResponseWriter, requestID string, status int, typ, msg string) {
	if requestID != "" {
		w.Header().Set("request-id", requestID)
	}
	fakekit.WriteJSON(w, status, map[string]any{
		"type":       "error",
		"error":      map[string]any{"type": typ, "message": msg},
		"request_id": requestID,
	})
}

func (a fakeReply) Fail(w http.ResponseWriter, c fakekit.Call, d fakekit.Decision) {
	id := fakekit.RequestID("req_", c)
	switch d.Fault {
	case fakekit.FaultRateLimit:
		fakekit.RetryAfterHeaders(w, d)
		fakeError(w, id, http.StatusTooManyRequests, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit.")
	case fakekit.FaultOverload:
		fakeError(w, id, 529, "overloaded_error", "Overloaded")
	case fakekit.FaultServerError:
		fakeError(w, id, http.StatusInternalServerError, "api_error", "Internal server error")
	case fakekit.FaultOutage:
		fakeError(w, id, http.StatusServiceUnavailable, "api_error", "Service unavailable")
	default: // FaultBadRequest
		fakeError(w, id, http.StatusBadRequest, "invalid_request_error", "messages.0.content: the simulated request is malformed")
	}
}

func (a fakeReply) message(c fakekit.Call, u events.Usage, final bool) fakeMessage {
	m := fakeMessage{
		ID:      fakekit.RequestID("msg_", c),
		Type:    "message",
		Role:    "assistant",
		Model:   a.model,
		Content: []map[string]any{},
		Usage:   toFakeUsage(c, u),
	}
	if final {
		stop := "end_turn"
		if u.OutputTokens >= a.maxTokens {
			stop = "max_tokens"
		}
		m.StopReason = &stop
		m.Content = append(m.Content, map[string]any{"type": "text", "text": fakekit.ReplyText(c)})
	}
	return m
}

func (a fakeReply) Succeed(w http.ResponseWriter, c fakekit.Call, u events.Usage) error {
	w.Header().Set("request-id", fakekit.RequestID("req_", c))
	if !a.stream {
		fakekit.WriteJSON(w, http.StatusOK, a.message(c, u, true))
		return nil
	}
	start := u
	start.OutputTokens, start.ReasoningTokens = fakekit.StalledOutputTokens, 0 // thinking comes with message_delta
	if err := a.StartStall(w, c, start); err != nil {
		return err
	}
	ev := fakekit.ResumeSSE(w)
	stop := *a.message(c, u, true).StopReason
	for _, e := range []struct {
		name string
		data any
	}{
		{"content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}}},
		{"ping", map[string]any{"type": "ping"}},
		{"content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": fakekit.ReplyText(c)}}},
		{"content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}},
		{"message_delta", map[string]any{
			"type":  "message_delta",
			"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
			"usage": map[string]any{"output_tokens": u.OutputTokens, "output_tokens_details": map[string]int64{"thinking_tokens": u.ReasoningTokens}},
		}},
		{"message_stop", map[string]any{"type": "message_stop"}},
	} {
		if err := ev.Send(e.name, e.data); err != nil {
			return err
		}
	}
	return nil
}

// StartStall sends message_start, which carries (and bills) the input.
func (a fakeReply) StartStall(w http.ResponseWriter, c fakekit.Call, u events.Usage) error {
	w.Header().Set("request-id", fakekit.RequestID("req_", c))
	ev := fakekit.StartSSE(w)
	return ev.Send("message_start", map[string]any{"type": "message_start", "message": a.message(c, u, false)})
}

// StreamError sends an error event of type api_error, as Anthropic does
// when a stream fails after it started.
func (a fakeReply) StreamError(w http.ResponseWriter) error {
	return fakekit.ResumeSSE(w).Send("error", map[string]any{"type": "error", "error": map[string]any{"type": "api_error", "message": "Internal server error"}})
}

// Observed: message_start reports the input and the first output token;
// the text deltas that follow carry no counts, so what a broken stream
// generated after message_start is not observable.
func (a fakeReply) Observed(f fakekit.Fault, billed events.Usage) events.Usage {
	if f == fakekit.FaultBrokenStream {
		billed.OutputTokens = min(billed.OutputTokens, fakekit.StalledOutputTokens)
	}
	return billed
}

func (a fakeReply) BreakStream(w http.ResponseWriter, c fakekit.Call, billed events.Usage) error {
	start := billed
	start.OutputTokens = min(billed.OutputTokens, fakekit.StalledOutputTokens)
	if err := a.StartStall(w, c, start); err != nil {
		return err
	}
	ev := fakekit.ResumeSSE(w)
	if err := ev.Send("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}}); err != nil {
		return err
	}
	for range billed.OutputTokens {
		if err := ev.Send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": fakekit.Token}}); err != nil {
			return err
		}
	}
	return nil
}
