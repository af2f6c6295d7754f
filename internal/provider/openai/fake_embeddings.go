package openai

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/provider/fakekit"
)

// fakeEmbeddingDims is the length of every embedding the fake returns.
const fakeEmbeddingDims = 8

// fakeEmbeddingsRequest is the part of an embeddings request the fake
// reads.
type fakeEmbeddingsRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
}

// inputs is how many embeddings the request asks for: one per string (or
// token array) of an array, one for a single string or token array.
func (q *fakeEmbeddingsRequest) inputs() int {
	var many []json.RawMessage
	if json.Unmarshal(q.Input, &many) != nil || len(many) == 0 {
		return 1
	}
	if many[0][0] == '"' || many[0][0] == '[' {
		return len(many)
	}
	return 1 // one array of tokens
}

// fakeEmbeddingsReply answers one attempt of an embeddings request.
type fakeEmbeddingsReply struct {
	api    *fakeAPI
	model  string
	n      int
	base64 bool
}

// embeddings serves POST /v1/embeddings.
func (api *fakeAPI) embeddings(s fakekit.Server, w http.ResponseWriter, r *http.Request) {
	var req fakeEmbeddingsRequest
	c, ok := api.decode(s, w, r, &req, func() string {
		switch {
		case req.Model == "":
			return "you must provide a model parameter"
		case len(req.Input) == 0 || string(req.Input) == "null" || string(req.Input) == `""` || string(req.Input) == "[]":
			return "input: expected a non-empty string or array"
		case req.EncodingFormat != "" && req.EncodingFormat != "float" && req.EncodingFormat != "base64":
			return "encoding_format: must be float or base64"
		}
		return ""
	}, noModel)
	if !ok {
		return
	}
	s.Serve(w, r, c, fakekit.Attempt{
		Model: req.Model,
		Reply: fakeEmbeddingsReply{api: api, model: req.Model, n: req.inputs(), base64: req.EncodingFormat == "base64"},
	})
}

// Shape: an embedding bills its input only.
func (e fakeEmbeddingsReply) Shape(u events.Usage) events.Usage {
	return events.Usage{InputTokens: u.InputTokens}
}

func (e fakeEmbeddingsReply) Fail(w http.ResponseWriter, c fakekit.Call, d fakekit.Decision) {
	e.api.fail(w, c, d)
}

func (e fakeEmbeddingsReply) Succeed(w http.ResponseWriter, c fakekit.Call, u events.Usage) error {
	w.Header().Set(RequestIDHeader, fakekit.RequestID("req_", c))
	data := make([]any, e.n)
	for i := range data {
		vec := make([]float32, fakeEmbeddingDims)
		for j := range vec {
			vec[j] = float32(i+1) / float32(j+2)
		}
		var emb any = vec
		if e.base64 {
			buf := make([]byte, 4*len(vec))
			for j, f := range vec {
				binary.LittleEndian.PutUint32(buf[4*j:], math.Float32bits(f))
			}
			emb = base64.StdEncoding.EncodeToString(buf)
		}
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": emb}
	}
	fakekit.WriteJSON(w, http.StatusOK, map[string]any{
		"object": "list",
		"data":   data,
		"model":  e.model,
		"usage":  map[string]any{"prompt_tokens": u.InputTokens, "total_tokens": u.InputTokens},
	})
	return nil
}

// An embedding never streams: the fake provider never calls these.
func (e fakeEmbeddingsReply) StartStall(http.ResponseWriter, fakekit.Call, events.Usage) error {
	return nil
}
func (e fakeEmbeddingsReply) StreamError(http.ResponseWriter) error { return nil }
