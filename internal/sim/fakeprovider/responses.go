package fakeprovider

import (
	"encoding/json"
	"net/http"

	"github.com/agentledger/ledger/internal/events"
)

// responsesRequest is the part of a Responses API request the server
// reads.
type responsesRequest struct {
	Model           string          `json:"model"`
	Input           json.RawMessage `json:"input"`
	MaxOutputTokens int64           `json:"max_output_tokens"`
	Stream          bool            `json:"stream"`
}

type responsesReply struct {
	model  string
	limit  int64
	stream bool
}

// openaiResponses serves POST /v1/responses.
func (s *Server) openaiResponses(w http.ResponseWriter, r *http.Request) {
	c, req, ok := decodeOpenAI(s, w, r, &responsesRequest{}, func(q *responsesRequest) string {
		switch {
		case q.Model == "":
			return "you must provide a model parameter"
		case len(q.Input) == 0 || string(q.Input) == "null":
			return "input: expected a string or an array of input items"
		}
		return ""
	})
	if !ok {
		return
	}
	s.serve(w, r, c, OpenAI, req.Model, req.Stream, req.MaxOutputTokens, responsesReply{model: req.Model, limit: req.MaxOutputTokens, stream: req.Stream})
}

// decodeOpenAI identifies and decodes the request of an OpenAI endpoint
// other than chat completions, and answers it (false) when it is invalid:
// check returns what is wrong with the decoded request, or "".
func decodeOpenAI[T any](s *Server, w http.ResponseWriter, r *http.Request, req *T, check func(*T) string) (callID, *T, bool) {
	c, err := s.identifyRequest(r)
	if err != nil {
		s.ledger.recordUnidentified()
		openaiError(w, "", http.StatusBadRequest, "invalid_request_error", "missing_header", err.Error())
		return c, nil, false
	}
	if r.Header.Get("Authorization") == "" {
		s.ledger.record(c, OpenAI, "", FaultInvalid, events.Usage{})
		openaiError(w, providerRequestID("req_", c), http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "You didn't provide an API key.")
		return c, nil, false
	}
	if err := decodeBody(w, r, req); err != nil {
		s.ledger.record(c, OpenAI, "", FaultInvalid, events.Usage{})
		openaiError(w, providerRequestID("req_", c), http.StatusBadRequest, "invalid_request_error", "invalid_json", err.Error())
		return c, nil, false
	}
	if msg := check(req); msg != "" {
		s.ledger.record(c, OpenAI, "", FaultInvalid, events.Usage{})
		openaiError(w, providerRequestID("req_", c), http.StatusBadRequest, "invalid_request_error", "invalid_value", msg)
		return c, nil, false
	}
	return c, req, true
}

func (q responsesReply) fail(w http.ResponseWriter, c callID, d Decision) {
	openaiReply{model: q.model}.fail(w, c, d)
}

// response is the response object; usage nil while it is in progress.
func (q responsesReply) response(c callID, status, text string, u *events.Usage) map[string]any {
	output := []any{}
	if text != "" {
		output = append(output, q.message(c, "completed", text))
	}
	resp := map[string]any{
		"id":                  providerRequestID("resp_", c),
		"object":              "response",
		"created_at":          openaiCreated,
		"status":              status,
		"model":               q.model,
		"output":              output,
		"parallel_tool_calls": true,
		"tool_choice":         "auto",
		"tools":               []any{},
		"usage":               nil,
	}
	if u != nil {
		resp["usage"] = map[string]any{
			"input_tokens":          u.InputTokens,
			"input_tokens_details":  map[string]any{"cached_tokens": u.CacheReadInputTokens},
			"output_tokens":         u.OutputTokens,
			"output_tokens_details": map[string]any{"reasoning_tokens": 0},
			"total_tokens":          u.InputTokens + u.OutputTokens,
		}
	}
	return resp
}

func (q responsesReply) message(c callID, status, text string) map[string]any {
	content := []any{}
	if text != "" {
		content = append(content, map[string]any{"type": "output_text", "text": text, "annotations": []any{}})
	}
	return map[string]any{"type": "message", "id": providerRequestID("msg_", c), "status": status, "role": "assistant", "content": content}
}

func (q responsesReply) succeed(w http.ResponseWriter, c callID, u events.Usage) error {
	w.Header().Set("x-request-id", providerRequestID("req_", c))
	if !q.stream {
		writeJSON(w, http.StatusOK, q.response(c, "completed", replyText(c), &u))
		return nil
	}
	st, err := q.begin(w, c, 0)
	if err != nil {
		return err
	}
	text := replyText(c)
	for _, e := range []map[string]any{
		{"type": "response.output_text.delta", "item_id": providerRequestID("msg_", c), "output_index": 0, "content_index": 0, "delta": text},
		{"type": "response.output_text.done", "item_id": providerRequestID("msg_", c), "output_index": 0, "content_index": 0, "text": text},
		{"type": "response.output_item.done", "output_index": 0, "item": q.message(c, "completed", text)},
		{"type": "response.completed", "response": q.response(c, "completed", text, &u)},
	} {
		if err := st.send(e); err != nil {
			return err
		}
	}
	return nil
}

// responsesStream numbers the events of a Responses API stream.
type responsesStream struct {
	ev  *sse
	seq int
}

func (st *responsesStream) send(e map[string]any) error {
	e["sequence_number"] = st.seq
	st.seq++
	return st.ev.send(e["type"].(string), e)
}

// begin starts a stream: the response is created and in progress, its
// message added, then n output_text deltas of one token each.
func (q responsesReply) begin(w http.ResponseWriter, c callID, n int64) (*responsesStream, error) {
	st := &responsesStream{ev: startSSE(w)}
	item := providerRequestID("msg_", c)
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
		if err := st.send(map[string]any{"type": "response.output_text.delta", "item_id": item, "output_index": 0, "content_index": 0, "delta": token}); err != nil {
			return nil, err
		}
	}
	return st, nil
}

func (q responsesReply) startStall(w http.ResponseWriter, c callID, u events.Usage) error {
	w.Header().Set("x-request-id", providerRequestID("req_", c))
	_, err := q.begin(w, c, min(u.OutputTokens, maxStalledChunks))
	return err
}

// streamError sends an error event, as the API does when a response
// fails after its stream started.
func (q responsesReply) streamError(w http.ResponseWriter) error {
	st := &responsesStream{ev: &sse{w: w, rc: http.NewResponseController(w)}, seq: 1000}
	return st.send(map[string]any{"type": "error", "code": "server_error", "message": "The server had an error while processing your request.", "param": nil})
}

func (q responsesReply) breakStream(w http.ResponseWriter, c callID, billed events.Usage) error {
	w.Header().Set("x-request-id", providerRequestID("req_", c))
	_, err := q.begin(w, c, billed.OutputTokens)
	return err
}

// observed: as for chat streams, the usage comes only with the completed
// response; before it only the output deltas can be counted.
func (q responsesReply) observed(f Fault, billed events.Usage) events.Usage {
	return openaiReply{}.observed(f, billed)
}
