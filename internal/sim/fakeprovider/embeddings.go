package fakeprovider

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"

	"github.com/agentledger/ledger/internal/events"
)

// embeddingDims is the length of every embedding the server returns.
const embeddingDims = 8

// embeddingsRequest is the part of an embeddings request the server reads.
type embeddingsRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
}

// inputs is how many embeddings the request asks for: one per string (or
// token array) of an array, one for a single string or token array.
func (q *embeddingsRequest) inputs() int {
	var many []json.RawMessage
	if json.Unmarshal(q.Input, &many) != nil || len(many) == 0 {
		return 1
	}
	if many[0][0] == '"' || many[0][0] == '[' {
		return len(many)
	}
	return 1 // one array of tokens
}

type embeddingsReply struct {
	model  string
	n      int
	base64 bool
}

// openaiEmbeddings serves POST /v1/embeddings.
func (s *Server) openaiEmbeddings(w http.ResponseWriter, r *http.Request) {
	c, req, ok := decodeOpenAI(s, w, r, &embeddingsRequest{}, func(q *embeddingsRequest) string {
		switch {
		case q.Model == "":
			return "you must provide a model parameter"
		case len(q.Input) == 0 || string(q.Input) == "null" || string(q.Input) == `""` || string(q.Input) == "[]":
			return "input: expected a non-empty string or array"
		case q.EncodingFormat != "" && q.EncodingFormat != "float" && q.EncodingFormat != "base64":
			return "encoding_format: must be float or base64"
		}
		return ""
	})
	if !ok {
		return
	}
	s.serve(w, r, c, OpenAI, req.Model, false, 0, embeddingsReply{model: req.Model, n: req.inputs(), base64: req.EncodingFormat == "base64"})
}

// shape: an embedding bills its input only.
func (e embeddingsReply) shape(u events.Usage) events.Usage {
	return events.Usage{InputTokens: u.InputTokens}
}

func (e embeddingsReply) fail(w http.ResponseWriter, c callID, d Decision) {
	openaiReply{model: e.model}.fail(w, c, d)
}

func (e embeddingsReply) succeed(w http.ResponseWriter, c callID, u events.Usage) error {
	w.Header().Set("x-request-id", providerRequestID("req_", c))
	data := make([]any, e.n)
	for i := range data {
		vec := make([]float32, embeddingDims)
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
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list",
		"data":   data,
		"model":  e.model,
		"usage":  map[string]any{"prompt_tokens": u.InputTokens, "total_tokens": u.InputTokens},
	})
	return nil
}

// An embedding never streams: serve never calls these.
func (e embeddingsReply) startStall(http.ResponseWriter, callID, events.Usage) error { return nil }
func (e embeddingsReply) streamError(http.ResponseWriter) error                      { return nil }
