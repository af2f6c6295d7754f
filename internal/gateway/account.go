package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/agentledger/ledger/internal/events"
	panthropic "github.com/agentledger/ledger/internal/provider/anthropic"
	pgemini "github.com/agentledger/ledger/internal/provider/gemini"
	popenai "github.com/agentledger/ledger/internal/provider/openai"
)

// bodyUsage reads the usage and the provider's request ID of a whole
// (non-streamed) response; ok is false when the body reports no usage.
func bodyUsage(a api, header http.Header, body []byte) (u events.Usage, providerID string, ok bool) {
	switch a {
	case apiAnthropicMessages:
		u, ok = panthropic.MessageUsage(body)
		return u, panthropic.RequestID(header), ok
	case apiOpenAIChat:
		u, ok = popenai.ChatUsage(body)
	case apiOpenAIResponses:
		u, ok = popenai.ResponseBodyUsage(body)
	case apiOpenAIEmbeddings:
		u, ok = popenai.EmbeddingUsage(body)
	default:
		return pgemini.ResponseUsage(body)
	}
	return u, popenai.RequestID(header), ok
}

// verdict is what a stream's accountant says of one event.
type verdict struct {
	drop    bool   // not for the client: the usage chunk the gateway asked for
	errData []byte // the event is an error; its data
}

// accountant follows the usage of one stream, event by event.
type accountant interface {
	observe(ev *sseEvent) verdict
	usage() events.Usage
	// complete reports whether the stream reached its end event.
	complete() bool
	// providerID is the provider's ID of the response, once known.
	providerID() string
}

// newAccountant returns the accountant of a stream of API a whose
// response had header.
func newAccountant(a api, header http.Header, info requestInfo) accountant {
	switch a {
	case apiAnthropicMessages:
		return &anthropicStream{id: panthropic.RequestID(header)}
	case apiOpenAIChat:
		return &chatStream{id: popenai.RequestID(header), injected: info.injectedUsage}
	case apiOpenAIResponses:
		return &responsesStream{id: popenai.RequestID(header)}
	}
	return &geminiStream{}
}

// anthropicStream: message_start carries the input, message_delta the
// cumulative output; message_stop ends the stream.
type anthropicStream struct {
	u    panthropic.StreamUsage
	id   string
	done bool
}

func (s *anthropicStream) observe(ev *sseEvent) verdict {
	switch ev.name {
	case "error":
		return verdict{errData: ev.data}
	case "message_stop":
		s.done = true
	}
	_ = s.u.ObserveRaw(ev.name, ev.data) // an unreadable event leaves the usage as it was
	return verdict{}
}

func (s *anthropicStream) usage() events.Usage { return s.u.Usage() }
func (s *anthropicStream) complete() bool      { return s.done }
func (s *anthropicStream) providerID() string  { return s.id }

// chatStream: the usage comes in the last chunk; before it the content
// chunks are counted; [DONE] ends the stream.
type chatStream struct {
	u        popenai.StreamUsage
	id       string
	injected bool
	done     bool
}

var (
	doneData  = []byte("[DONE]")
	errorWord = []byte(`"error"`)
)

func (s *chatStream) observe(ev *sseEvent) verdict {
	if bytes.Equal(bytes.TrimSpace(ev.data), doneData) {
		s.done = true
		return verdict{}
	}
	if len(ev.data) == 0 {
		return verdict{}
	}
	if bytes.Contains(ev.data, errorWord) && isErrorObject(ev.data) {
		return verdict{errData: ev.data}
	}
	usageOnly, _ := s.u.ObserveRaw(ev.data)
	return verdict{drop: usageOnly && s.injected}
}

func (s *chatStream) usage() events.Usage { return s.u.Usage() }
func (s *chatStream) complete() bool      { return s.done || s.u.Complete() }
func (s *chatStream) providerID() string  { return s.id }

// responsesStream: response.completed (or .incomplete) carries the usage
// and ends the stream; error and response.failed are errors.
type responsesStream struct {
	u    popenai.ResponseStreamUsage
	id   string
	done bool
}

func (s *responsesStream) observe(ev *sseEvent) verdict {
	_ = s.u.ObserveRaw(ev.name, ev.data)
	switch ev.name {
	case "error", "response.failed":
		return verdict{errData: ev.data}
	case "response.completed", "response.incomplete":
		s.done = true
	}
	return verdict{}
}

func (s *responsesStream) usage() events.Usage { return s.u.Usage() }
func (s *responsesStream) complete() bool      { return s.done }
func (s *responsesStream) providerID() string  { return s.id }

// geminiStream: every chunk carries the running usage; the stream ends
// after a chunk with a finish reason.
type geminiStream struct {
	u        pgemini.StreamUsage
	id       string
	finished bool
}

var finishReason = []byte(`"finishReason"`)

func (s *geminiStream) observe(ev *sseEvent) verdict {
	if len(ev.data) == 0 {
		return verdict{}
	}
	if bytes.Contains(ev.data, errorWord) {
		if _, ok := pgemini.StreamError(ev.data); ok {
			return verdict{errData: ev.data}
		}
	}
	if id, err := s.u.ObserveRaw(ev.data); err == nil && id != "" {
		s.id = id
	}
	// A quoted key cannot occur inside a JSON string, where quotes are
	// escaped, so this finds the member itself.
	if bytes.Contains(ev.data, finishReason) {
		s.finished = true
	}
	return verdict{}
}

func (s *geminiStream) usage() events.Usage { return s.u.Usage() }
func (s *geminiStream) complete() bool      { return s.finished }
func (s *geminiStream) providerID() string  { return s.id }

// isErrorObject reports whether a chunk's "error" member is an object: an
// error in the stream, rather than a word in the generated text.
func isErrorObject(data []byte) bool {
	var v struct {
		Error json.RawMessage `json:"error"`
	}
	return json.Unmarshal(data, &v) == nil && len(v.Error) > 0 && v.Error[0] == '{'
}
