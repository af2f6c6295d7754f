package fakeprovider

import (
	"encoding/json"
	"net/http"

	"github.com/agentledger/ledger/internal/events"
)

// openaiRequest is the part of a Chat Completions request the server reads.
type openaiRequest struct {
	Model               string            `json:"model"`
	Messages            []json.RawMessage `json:"messages"`
	MaxCompletionTokens int64             `json:"max_completion_tokens"`
	MaxTokens           int64             `json:"max_tokens"`
	Stream              bool              `json:"stream"`
	StreamOptions       struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// openaiCreated is the fixed creation time of every completion, so that the
// answers are deterministic.
const openaiCreated = 1_700_000_000

type openaiReply struct {
	model string
	limit int64
	// stream answers with chunks; includeUsage adds the usage chunk at
	// the end, as stream_options.include_usage asks.
	stream, includeUsage bool
}

func (s *Server) openaiChatCompletions(w http.ResponseWriter, r *http.Request) {
	c, err := s.identifyRequest(r)
	if err != nil {
		s.ledger.recordUnidentified()
		openaiError(w, "", http.StatusBadRequest, "invalid_request_error", "missing_header", err.Error())
		return
	}
	if r.Header.Get("Authorization") == "" {
		s.ledger.record(c, OpenAI, "", FaultInvalid, events.Usage{})
		openaiError(w, providerRequestID("req_", c), http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "You didn't provide an API key.")
		return
	}
	var req openaiRequest
	if err := decodeBody(w, r, &req); err != nil {
		s.ledger.record(c, OpenAI, "", FaultInvalid, events.Usage{})
		openaiError(w, providerRequestID("req_", c), http.StatusBadRequest, "invalid_request_error", "invalid_json", err.Error())
		return
	}
	var msg string
	switch {
	case req.Model == "":
		msg = "you must provide a model parameter"
	case len(req.Messages) == 0:
		msg = "messages: expected a non-empty array"
	}
	if msg != "" {
		s.ledger.record(c, OpenAI, req.Model, FaultInvalid, events.Usage{})
		openaiError(w, providerRequestID("req_", c), http.StatusBadRequest, "invalid_request_error", "invalid_value", msg)
		return
	}
	limit := req.MaxCompletionTokens
	if limit == 0 {
		limit = req.MaxTokens
	}
	s.serve(w, r, c, OpenAI, req.Model, req.Stream, limit, openaiReply{model: req.Model, limit: limit, stream: req.Stream, includeUsage: req.StreamOptions.IncludeUsage})
}

func openaiError(w http.ResponseWriter, requestID string, status int, typ, code, msg string) {
	if requestID != "" {
		w.Header().Set("x-request-id", requestID)
	}
	var c any
	if code != "" {
		c = code
	}
	writeJSON(w, status, map[string]any{
		"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": c},
	})
}

func (o openaiReply) fail(w http.ResponseWriter, c callID, d Decision) {
	id := providerRequestID("req_", c)
	switch d.Fault {
	case FaultRateLimit:
		retryAfterHeaders(w, d)
		w.Header().Set("x-ratelimit-remaining-requests", "0")
		w.Header().Set("x-ratelimit-reset-requests", d.RetryAfter.String())
		openaiError(w, id, http.StatusTooManyRequests, "requests", "rate_limit_exceeded", "Rate limit reached for requests per min.")
	case FaultOverload:
		openaiError(w, id, http.StatusServiceUnavailable, "server_error", "", "The server is overloaded or not ready yet.")
	case FaultServerError:
		openaiError(w, id, http.StatusInternalServerError, "server_error", "", "The server had an error while processing your request.")
	default: // FaultBadRequest
		openaiError(w, id, http.StatusBadRequest, "invalid_request_error", "invalid_value", "messages[0].content: the simulated request is malformed")
	}
}

func (o openaiReply) succeed(w http.ResponseWriter, c callID, u events.Usage) error {
	w.Header().Set("x-request-id", providerRequestID("req_", c))
	finish := "stop"
	if o.limit > 0 && u.OutputTokens >= o.limit {
		finish = "length"
	}
	if o.stream {
		return o.succeedStream(w, c, u, finish)
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id":                 providerRequestID("chatcmpl-", c),
		"object":             "chat.completion",
		"created":            openaiCreated,
		"model":              o.model,
		"system_fingerprint": "fp_fakeprovider",
		"choices": []any{map[string]any{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": replyText(c), "refusal": nil},
			"logprobs":      nil,
			"finish_reason": finish,
		}},
		"usage": openaiUsage(u),
	})
	return nil
}

// openaiUsage is the usage object of a chat completion.
func openaiUsage(u events.Usage) map[string]any {
	return map[string]any{
		"prompt_tokens":             u.InputTokens,
		"completion_tokens":         u.OutputTokens,
		"total_tokens":              u.InputTokens + u.OutputTokens,
		"prompt_tokens_details":     map[string]any{"cached_tokens": u.CacheReadInputTokens, "audio_tokens": 0},
		"completion_tokens_details": map[string]any{"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
	}
}
