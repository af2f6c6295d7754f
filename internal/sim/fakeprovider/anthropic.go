package fakeprovider

import (
	"encoding/json"
	"net/http"

	"github.com/agentledger/ledger/internal/events"
)

// anthropicRequest is the part of a Messages API request the server reads.
type anthropicRequest struct {
	Model     string            `json:"model"`
	MaxTokens int64             `json:"max_tokens"`
	Messages  []json.RawMessage `json:"messages"`
	Stream    bool              `json:"stream"`
}

// anthropicUsage is the Messages API usage object. input_tokens excludes
// the cache tokens, unlike the contract's InputTokens.
type anthropicUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

func toAnthropicUsage(u events.Usage) anthropicUsage {
	return anthropicUsage{
		InputTokens:              u.InputTokens - u.CacheReadInputTokens - u.CacheCreationInputTokens,
		OutputTokens:             u.OutputTokens,
		CacheCreationInputTokens: u.CacheCreationInputTokens,
		CacheReadInputTokens:     u.CacheReadInputTokens,
	}
}

type anthropicMessage struct {
	ID           string           `json:"id"`
	Type         string           `json:"type"`
	Role         string           `json:"role"`
	Model        string           `json:"model"`
	Content      []map[string]any `json:"content"`
	StopReason   *string          `json:"stop_reason"`
	StopSequence *string          `json:"stop_sequence"`
	Usage        anthropicUsage   `json:"usage"`
}

type anthropicReply struct {
	model     string
	maxTokens int64
	stream    bool
}

func (s *Server) anthropicMessages(w http.ResponseWriter, r *http.Request) {
	c, err := s.identifyRequest(r)
	if err != nil {
		s.ledger.recordUnidentified()
		anthropicError(w, "", http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	if r.Header.Get("X-Api-Key") == "" && r.Header.Get("Authorization") == "" {
		s.ledger.record(c, Anthropic, "", FaultInvalid, events.Usage{})
		anthropicError(w, providerRequestID("req_", c), http.StatusUnauthorized, "authentication_error", "x-api-key header is required")
		return
	}
	var req anthropicRequest
	if err := decodeBody(w, r, &req); err != nil {
		s.ledger.record(c, Anthropic, "", FaultInvalid, events.Usage{})
		anthropicError(w, providerRequestID("req_", c), http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	if msg := req.validate(); msg != "" {
		s.ledger.record(c, Anthropic, req.Model, FaultInvalid, events.Usage{})
		anthropicError(w, providerRequestID("req_", c), http.StatusBadRequest, "invalid_request_error", msg)
		return
	}
	s.serve(w, r, c, Anthropic, req.Model, req.Stream, req.MaxTokens, anthropicReply{model: req.Model, maxTokens: req.MaxTokens, stream: req.Stream})
}

func (q *anthropicRequest) validate() string {
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

func anthropicError(w http.ResponseWriter, requestID string, status int, typ, msg string) {
	if requestID != "" {
		w.Header().Set("request-id", requestID)
	}
	writeJSON(w, status, map[string]any{
		"type":       "error",
		"error":      map[string]any{"type": typ, "message": msg},
		"request_id": requestID,
	})
}

func (a anthropicReply) fail(w http.ResponseWriter, c callID, d Decision) {
	id := providerRequestID("req_", c)
	switch d.Fault {
	case FaultRateLimit:
		retryAfterHeaders(w, d)
		anthropicError(w, id, http.StatusTooManyRequests, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit.")
	case FaultOverload:
		anthropicError(w, id, 529, "overloaded_error", "Overloaded")
	case FaultServerError:
		anthropicError(w, id, http.StatusInternalServerError, "api_error", "Internal server error")
	default: // FaultBadRequest
		anthropicError(w, id, http.StatusBadRequest, "invalid_request_error", "messages.0.content: the simulated request is malformed")
	}
}

func (a anthropicReply) message(c callID, u events.Usage, final bool) anthropicMessage {
	m := anthropicMessage{
		ID:      providerRequestID("msg_", c),
		Type:    "message",
		Role:    "assistant",
		Model:   a.model,
		Content: []map[string]any{},
		Usage:   toAnthropicUsage(u),
	}
	if final {
		stop := "end_turn"
		if u.OutputTokens >= a.maxTokens {
			stop = "max_tokens"
		}
		m.StopReason = &stop
		m.Content = append(m.Content, map[string]any{"type": "text", "text": replyText(c)})
	}
	return m
}

func (a anthropicReply) succeed(w http.ResponseWriter, c callID, u events.Usage) error {
	w.Header().Set("request-id", providerRequestID("req_", c))
	if !a.stream {
		writeJSON(w, http.StatusOK, a.message(c, u, true))
		return nil
	}
	start := u
	start.OutputTokens = StalledOutputTokens
	if err := a.startStall(w, c, start); err != nil {
		return err
	}
	ev := &sse{w: w, rc: http.NewResponseController(w)}
	stop := *a.message(c, u, true).StopReason
	for _, e := range []struct {
		name string
		data any
	}{
		{"content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}}},
		{"ping", map[string]any{"type": "ping"}},
		{"content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": replyText(c)}}},
		{"content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}},
		{"message_delta", map[string]any{
			"type":  "message_delta",
			"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
			"usage": map[string]any{"output_tokens": u.OutputTokens},
		}},
		{"message_stop", map[string]any{"type": "message_stop"}},
	} {
		if err := ev.send(e.name, e.data); err != nil {
			return err
		}
	}
	return nil
}

// startStall sends message_start, which carries (and bills) the input.
func (a anthropicReply) startStall(w http.ResponseWriter, c callID, u events.Usage) error {
	w.Header().Set("request-id", providerRequestID("req_", c))
	ev := startSSE(w)
	return ev.send("message_start", map[string]any{"type": "message_start", "message": a.message(c, u, false)})
}

// replyText is the text of a successful answer.
func replyText(c callID) string {
	return "Simulated answer to " + c.RequestID + "."
}

// streamError sends an error event of type api_error, as Anthropic does
// when a stream fails after it started.
func (a anthropicReply) streamError(w http.ResponseWriter) error {
	ev := &sse{w: w, rc: http.NewResponseController(w)}
	return ev.send("error", map[string]any{"type": "error", "error": map[string]any{"type": "api_error", "message": "Internal server error"}})
}
