package gemini

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/provider/fakekit"
)

// Fake is the provider's fake dialect (fakekit.Faker): FakeDialect.
func (Provider) Fake() *fakekit.Dialect { return FakeDialect() }

// fakeTiers are the service tiers the fake's usageMetadata names.
var fakeTiers = []string{"standard", "flex"}

// FakeDialect is the generateContent API (version v1beta) as the fake
// provider speaks it, under /gemini (the SDK's base URL is the fake
// provider's URL and /gemini/): every chunk of a stream carries the
// usage so far, errors are google.rpc statuses (a rate limit's hint in a
// RetryInfo detail), and no rate-limit headers. Its Sim drives the SDK's
// Models.GenerateContentStream.
func FakeDialect() *fakekit.Dialect {
	return &fakekit.Dialect{
		Provider:  Name,
		Prefix:    "/" + Name,
		BasePath:  "/",
		Endpoints: []fakekit.Endpoint{{Path: "/v1beta/models/", Handle: fakeModels}},
		Limits:    fakekit.SplitLimits,
		// thoughtsTokenCount and usageMetadata.serviceTier.
		Reasoning:    true,
		ServiceTiers: fakeTiers,
		Sim:          &fakekit.Sim{Model: "gemini-2.5-flash", Order: 2, NewCaller: newFakeCaller, Classifier: Classifier},
	}
}

// fakeRequest is the part of a generateContent request the fake reads.
type fakeRequest struct {
	Contents         []json.RawMessage `json:"contents"`
	GenerationConfig struct {
		MaxOutputTokens int64 `json:"maxOutputTokens"`
	} `json:"generationConfig"`
}

// fakeReply answers one attempt of a generateContent request.
type fakeReply struct {
	model  string
	limit  int64
	stream bool
}

// fakeModels serves POST /v1beta/models/{model}:generateContent and
// :streamGenerateContent?alt=sse.
func fakeModels(s fakekit.Server, w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/v1beta/models/")
	model, method, ok := strings.Cut(rest, ":")
	if !ok || model == "" || strings.Contains(model, "/") || (method != "generateContent" && method != "streamGenerateContent") {
		fakeError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("method %q of model %q is not found", method, model), nil)
		return
	}
	stream := method == "streamGenerateContent"
	if stream && r.URL.Query().Get("alt") != "sse" {
		fakeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "streamGenerateContent: the fake provider streams only with alt=sse", nil)
		return
	}
	c, err := s.Identify(r)
	if err != nil {
		s.Unidentified()
		fakeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", err.Error(), nil)
		return
	}
	if r.Header.Get("X-Goog-Api-Key") == "" {
		s.Invalid(c, model)
		fakeError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "API key not valid. Please pass a valid API key.", nil)
		return
	}
	var req fakeRequest
	if err := fakekit.DecodeBody(w, r, &req); err != nil {
		s.Invalid(c, model)
		fakeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", err.Error(), nil)
		return
	}
	if len(req.Contents) == 0 {
		s.Invalid(c, model)
		fakeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "contents is not specified", nil)
		return
	}
	limit := req.GenerationConfig.MaxOutputTokens
	s.Serve(w, r, c, fakekit.Attempt{
		Model: model, Stream: stream, MaxOutput: limit,
		Reply: fakeReply{model: model, limit: limit, stream: stream},
	})
}

func fakeError(w http.ResponseWriter, status int, code, msg string, details []any) {
	body := map[string]any{"code": status, "message": msg, "status": code}
	if details != nil {
		body["details"] = details
	}
	fakekit.WriteJSON(w, status, map[string]any{"error": body})
}

func (g fakeReply) Fail(w http.ResponseWriter, _ fakekit.Call, d fakekit.Decision) {
	switch d.Fault {
	case fakekit.FaultRateLimit:
		fakeError(w, http.StatusTooManyRequests, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota).", []any{
			map[string]any{
				"@type":      "type.googleapis.com/google.rpc.RetryInfo",
				"retryDelay": fmt.Sprintf("%.3fs", d.RetryAfter.Seconds()),
			},
		})
	case fakekit.FaultOverload:
		fakeError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "The model is overloaded. Please try again later.", nil)
	case fakekit.FaultServerError:
		fakeError(w, http.StatusInternalServerError, "INTERNAL", "An internal error has occurred.", nil)
	case fakekit.FaultOutage:
		fakeError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "The service is currently unavailable.", nil)
	default: // FaultBadRequest
		fakeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Request contains an invalid argument.", nil)
	}
}

// chunk is one generateContent response (a whole answer, or a chunk of a
// streamed one). usage is cumulative.
func (g fakeReply) chunk(c fakekit.Call, text string, finish string, u events.Usage) map[string]any {
	cand := map[string]any{
		"content": map[string]any{"role": "model", "parts": []any{map[string]any{"text": text}}},
		"index":   0,
	}
	if finish != "" {
		cand["finishReason"] = finish
	}
	// candidatesTokenCount excludes the thoughts, which are output too.
	thoughts := min(u.ReasoningTokens, u.OutputTokens)
	usage := map[string]any{
		"promptTokenCount":     u.InputTokens,
		"candidatesTokenCount": u.OutputTokens - thoughts,
		"totalTokenCount":      u.InputTokens + u.OutputTokens,
	}
	if u.CacheReadInputTokens > 0 {
		usage["cachedContentTokenCount"] = u.CacheReadInputTokens
	}
	if thoughts > 0 {
		usage["thoughtsTokenCount"] = thoughts
	}
	if tier := fakekit.ServiceTierFor(c.RequestID, fakeTiers); tier != "" {
		usage["serviceTier"] = tier
	}
	return map[string]any{
		"candidates":    []any{cand},
		"usageMetadata": usage,
		"modelVersion":  g.model,
		"responseId":    fakekit.RequestID("", c),
	}
}

func (g fakeReply) finish(u events.Usage) string {
	if g.limit > 0 && u.OutputTokens >= g.limit {
		return "MAX_TOKENS"
	}
	return "STOP"
}

func (g fakeReply) Succeed(w http.ResponseWriter, c fakekit.Call, u events.Usage) error {
	if !g.stream {
		fakekit.WriteJSON(w, http.StatusOK, g.chunk(c, fakekit.ReplyText(c), g.finish(u), u))
		return nil
	}
	first := u
	first.OutputTokens = fakekit.StalledOutputTokens
	if err := g.StartStall(w, c, first); err != nil {
		return err
	}
	return fakekit.ResumeSSE(w).Send("", g.chunk(c, "", g.finish(u), u))
}

// StartStall sends the first chunk, whose usage reports (and bills) the
// input.
func (g fakeReply) StartStall(w http.ResponseWriter, c fakekit.Call, u events.Usage) error {
	return fakekit.StartSSE(w).Send("", g.chunk(c, fakekit.ReplyText(c), "", u))
}

// StreamError sends an error object, as the Gemini API does when a stream
// fails after it started.
func (g fakeReply) StreamError(w http.ResponseWriter) error {
	return fakekit.ResumeSSE(w).Send("", map[string]any{"error": map[string]any{"code": 500, "message": "An internal error has occurred.", "status": "INTERNAL"}})
}

// BreakStream: Gemini's chunks each carry the running usage, so
// everything a broken stream billed is observable.
func (g fakeReply) BreakStream(w http.ResponseWriter, c fakekit.Call, billed events.Usage) error {
	ev := fakekit.StartSSE(w)
	for n := range billed.OutputTokens {
		u := billed
		u.OutputTokens = n + 1
		if err := ev.Send("", g.chunk(c, fakekit.Token, "", u)); err != nil {
			return err
		}
	}
	return nil
}
