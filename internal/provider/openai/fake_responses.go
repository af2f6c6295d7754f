package openai

import (
	"encoding/json"
	"net/http"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/provider/fakekit"
)

// fakeResponsesRequest is the part of a Responses API request the fake
// reads.
type fakeResponsesRequest struct {
	Model           string          `json:"model"`
	Input           json.RawMessage `json:"input"`
	MaxOutputTokens int64           `json:"max_output_tokens"`
	Stream          bool            `json:"stream"`
}

// fakeResponsesReply answers one attempt of a response.
type fakeResponsesReply struct {
	api    *fakeAPI
	model  string
	limit  int64
	stream bool
}

// responses serves POST /v1/responses.
func (api *fakeAPI) responses(s fakekit.Server, w http.ResponseWriter, r *http.Request) {
	var req fakeResponsesRequest
	c, ok := api.decode(s, w, r, &req, func() string {
		switch {
		case req.Model == "":
			return "you must provide a model parameter"
		case len(req.Input) == 0 || string(req.Input) == "null":
			return "input: expected a string or an array of input items"
		}
		return ""
	}, noModel)
	if !ok {
		return
	}
	s.Serve(w, r, c, fakekit.Attempt{
		Model: req.Model, Stream: req.Stream, MaxOutput: req.MaxOutputTokens,
		Reply: fakeResponsesReply{api: api, model: req.Model, limit: req.MaxOutputTokens, stream: req.Stream},
	})
}

// noModel: the truth of a request the check refuses names no model.
func noModel() string { return "" }

func (q fakeResponsesReply) Fail(w http.ResponseWriter, c fakekit.Call, d fakekit.Decision) {
	q.api.fail(w, c, d)
}

// response is the response object; usage nil while it is in progress.
func (q fakeResponsesReply) response(c fakekit.Call, status, text string, u *events.Usage) map[string]any {
	output := []any{}
	if text != "" {
		output = append(output, q.message(c, "completed", text))
	}
	resp := map[string]any{
		"id":                  fakekit.RequestID("resp_", c),
		"object":              "response",
		"created_at":          fakeCreated,
		"status":              status,
		"model":               q.model,
		"output":              output,
		"parallel_tool_calls": true,
		"tool_choice":         "auto",
		"tools":               []any{},
		"usage":               nil,
	}
	q.api.setTier(resp, c)
	if u != nil {
		resp["usage"] = map[string]any{
			"input_tokens":          u.InputTokens,
			"input_tokens_details":  map[string]any{"cached_tokens": u.CacheReadInputTokens},
			"output_tokens":         u.OutputTokens,
			"output_tokens_details": map[string]any{"reasoning_tokens": u.ReasoningTokens},
			"total_tokens":          u.InputTokens + u.OutputTokens,
		}
	}
	return resp
}

func (q fakeResponsesReply) message(c fakekit.Call, status, text string) map[string]any {
	content := []any{}
	if text != "" {
		content = append(content, map[string]any{"type": "output_text", "text": text, "annotations": []any{}})
	}
	return map[string]any{"type": "message", "id": fakekit.RequestID("msg_", c), "status": status, "role": "assistant", "content": content}
}

func (q fakeResponsesReply) Succeed(w http.ResponseWriter, c fakekit.Call, u events.Usage) error {
	w.Header().Set(RequestIDHeader, fakekit.RequestID("req_", c))
	if !q.stream {
		fakekit.WriteJSON(w, http.StatusOK, q.response(c, "completed", fakekit.ReplyText(c), &u))
		return nil
	}
	st, err := q.begin(w, c, 0)
	if err != nil {
		return err
	}
	text := fakekit.ReplyText(c)
	for _, e := range []map[string]any{
		{"type": "response.output_text.delta", "item_id": fakekit.RequestID("msg_", c), "output_index": 0, "content_index": 0, "delta": text},
		{"type": "response.output_text.done", "item_id": fakekit.RequestID("msg_", c), "output_index": 0, "content_index": 0, "text": text},
		{"type": "response.output_item.done", "output_index": 0, "item": q.message(c, "completed", text)},
		{"type": "response.completed", "response": q.response(c, "completed", text, &u)},
	} {
		if err := st.send(e); err != nil {
			return err
		}
	}
	return nil
}

// fakeResponsesStream numbers the events of a Responses API stream.
type fakeResponsesStream struct {
	ev  *fakekit.SSE
	seq int
}

func (st *fakeResponsesStream) send(e map[string]any) error {
	e["sequence_number"] = st.seq
	st.seq++
	return st.ev.Send(e["type"].(string), e)
}

// begin starts a stream: the response is created and in progress, its
// message added, then n output_text deltas of one token each.
func (q fakeResponsesReply) begin(w http.ResponseWriter, c fakekit.Call, n int64) (*fakeResponsesStream, error) {
	st := &fakeResponsesStream{ev: fakekit.StartSSE(w)}
	item := fakekit.RequestID("msg_", c)
	for _, e := range []map[string]any{
		{"type": "response.created", "response": q.response(c, "in_progress", "", nil)},
		{"type": "response.in_progress", "response": q.response(c, "in_progress", "", nil)},
		{"type": "response.output_item.added", "output_index": 0, "item": q.message(c, "in_progress", "")},
		{"type": "response.content_part.added", "item_id": item, "output_index": 0, "content_index": 0, "part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}},
	} {
		if err := st.send(e); err != nil {
			return nil, err
		}
	}
	for range n {
		if err := st.send(map[string]any{"type": "response.output_text.delta", "item_id": item, "output_index": 0, "content_index": 0, "delta": fakekit.Token}); err != nil {
			return nil, err
		}
	}
	return st, nil
}

func (q fakeResponsesReply) StartStall(w http.ResponseWriter, c fakekit.Call, u events.Usage) error {
	w.Header().Set(RequestIDHeader, fakekit.RequestID("req_", c))
	_, err := q.begin(w, c, min(u.OutputTokens, fakekit.MaxStalledChunks))
	return err
}

// StreamError sends an error event, as the API does when a response
// fails after its stream started.
func (q fakeResponsesReply) StreamError(w http.ResponseWriter) error {
	st := &fakeResponsesStream{ev: fakekit.ResumeSSE(w), seq: 1000}
	return st.send(map[string]any{"type": "error", "code": "server_error", "message": "The server had an error while processing your request.", "param": nil})
}

func (q fakeResponsesReply) BreakStream(w http.ResponseWriter, c fakekit.Call, billed events.Usage) error {
	w.Header().Set(RequestIDHeader, fakekit.RequestID("req_", c))
	_, err := q.begin(w, c, billed.OutputTokens)
	return err
}

// Observed: as for chat streams, the usage comes only with the completed
// response; before it only the output deltas can be counted.
func (q fakeResponsesReply) Observed(f fakekit.Fault, billed events.Usage) events.Usage {
	return fakeStreamObserved(f, billed)
}
