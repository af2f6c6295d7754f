package fakeprovider

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentledger/ledger/internal/events"
)

// geminiRequest is the part of a generateContent request the server reads.
type geminiRequest struct {
	Contents         []json.RawMessage `json:"contents"`
	GenerationConfig struct {
		MaxOutputTokens int64 `json:"maxOutputTokens"`
	} `json:"generationConfig"`
}

type geminiReply struct {
	model  string
	limit  int64
	stream bool
}

// geminiModels serves POST /gemini/v1beta/models/{model}:generateContent
// and :streamGenerateContent?alt=sse (and the same without the /gemini
// prefix, see Listen).
func (s *Server) geminiModels(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/gemini"), "/v1beta/models/")
	model, method, ok := strings.Cut(rest, ":")
	if !ok || model == "" || strings.Contains(model, "/") || (method != "generateContent" && method != "streamGenerateContent") {
		geminiError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("method %q of model %q is not found", method, model), nil)
		return
	}
	stream := method == "streamGenerateContent"
	if stream && r.URL.Query().Get("alt") != "sse" {
		geminiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "streamGenerateContent: the fake provider streams only with alt=sse", nil)
		return
	}
	c, err := s.identifyRequest(r)
	if err != nil {
		s.ledger.recordUnidentified()
		geminiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", err.Error(), nil)
		return
	}
	if r.Header.Get("X-Goog-Api-Key") == "" {
		s.ledger.record(c, Gemini, model, FaultInvalid, events.Usage{})
		geminiError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "API key not valid. Please pass a valid API key.", nil)
		return
	}
	var req geminiRequest
	if err := decodeBody(w, r, &req); err != nil {
		s.ledger.record(c, Gemini, model, FaultInvalid, events.Usage{})
		geminiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", err.Error(), nil)
		return
	}
	if len(req.Contents) == 0 {
		s.ledger.record(c, Gemini, model, FaultInvalid, events.Usage{})
		geminiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "contents is not specified", nil)
		return
	}
	limit := req.GenerationConfig.MaxOutputTokens
	s.serve(w, r, c, Gemini, model, stream, limit, geminiReply{model: model, limit: limit, stream: stream})
}

func geminiError(w http.ResponseWriter, status int, code, msg string, details []any) {
	body := map[string]any{"code": status, "message": msg, "status": code}
	if details != nil {
		body["details"] = details
	}
	writeJSON(w, status, map[string]any{"error": body})
}

func (g geminiReply) fail(w http.ResponseWriter, _ callID, d Decision) {
	switch d.Fault {
	case FaultRateLimit:
		geminiError(w, http.StatusTooManyRequests, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota).", []any{
			map[string]any{
				"@type":      "type.googleapis.com/google.rpc.RetryInfo",
				"retryDelay": fmt.Sprintf("%.3fs", d.RetryAfter.Seconds()),
			},
		})
	case FaultOverload:
		geminiError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "The model is overloaded. Please try again later.", nil)
	case FaultServerError:
		geminiError(w, http.StatusInternalServerError, "INTERNAL", "An internal error has occurred.", nil)
	default: // FaultBadRequest
		geminiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Request contains an invalid argument.", nil)
	}
}

// chunk is one generateContent response (a whole answer, or a chunk of a
// streamed one). usage is cumulative.
func (g geminiReply) chunk(c callID, text string, finish string, u events.Usage) map[string]any {
	cand := map[string]any{
		"content": map[string]any{"role": "model", "parts": []any{map[string]any{"text": text}}},
		"index":   0,
	}
	if finish != "" {
		cand["finishReason"] = finish
	}
	usage := map[string]any{
		"promptTokenCount":     u.InputTokens,
		"candidatesTokenCount": u.OutputTokens,
		"totalTokenCount":      u.InputTokens + u.OutputTokens,
	}
	if u.CacheReadInputTokens > 0 {
		usage["cachedContentTokenCount"] = u.CacheReadInputTokens
	}
	return map[string]any{
		"candidates":    []any{cand},
		"usageMetadata": usage,
		"modelVersion":  g.model,
		"responseId":    providerRequestID("", c),
	}
}

func (g geminiReply) finish(u events.Usage) string {
	if g.limit > 0 && u.OutputTokens >= g.limit {
		return "MAX_TOKENS"
	}
	return "STOP"
}

func (g geminiReply) succeed(w http.ResponseWriter, c callID, u events.Usage) error {
	if !g.stream {
		writeJSON(w, http.StatusOK, g.chunk(c, replyText(c), g.finish(u), u))
		return nil
	}
	first := u
	first.OutputTokens = StalledOutputTokens
	if err := g.startStall(w, c, first); err != nil {
		return err
	}
	ev := &sse{w: w, rc: http.NewResponseController(w)}
	return ev.send("", g.chunk(c, "", g.finish(u), u))
}

// startStall sends the first chunk, whose usage reports (and bills) the
// input.
func (g geminiReply) startStall(w http.ResponseWriter, c callID, u events.Usage) error {
	ev := startSSE(w)
	return ev.send("", g.chunk(c, replyText(c), "", u))
}

// streamError sends an error object, as the Gemini API does when a stream
// fails after it started.
func (g geminiReply) streamError(w http.ResponseWriter) error {
	ev := &sse{w: w, rc: http.NewResponseController(w)}
	return ev.send("", map[string]any{"error": map[string]any{"code": 500, "message": "An internal error has occurred.", "status": "INTERNAL"}})
}
