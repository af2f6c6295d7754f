package openai

import (
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentledger/ledger/internal/events"
)

// StreamUsage follows the usage of a chat completion stream, so that a
// stream that breaks before its last chunk still reports what is known of
// what was billed.
//
// Chat Completions report usage only in the stream's last chunk, and only
// when the request set stream_options.include_usage. When that chunk
// arrived, Usage is its usage, exactly. When it did not (the stream broke
// before it, or the request did not ask for it), the input is not
// knowable from the stream at all, and the output is counted as one token
// per chunk that carries generated content (text, a refusal, tool-call
// arguments), which is how OpenAI streams text; it is a lower bound when
// a chunk carries more than one token.
//
// The zero value is ready to use. A StreamUsage is not safe for concurrent
// use; it belongs to the goroutine reading the stream.
type StreamUsage struct {
	usage  events.Usage
	final  bool  // the usage chunk arrived
	chunks int64 // content deltas seen, one per choice that carried any
	tierSeen
}

// tierSeen keeps the service tier a stream names (every chat chunk names
// it; a Responses stream's response.created and its end event do).
type tierSeen struct{ tier string }

// takeTier keeps the tier a chunk or event names, when it names one.
func (t *tierSeen) takeTier(reported string) {
	if tier := ServiceTierOf(reported); tier != "" {
		t.tier = tier
	}
}

// ServiceTier returns the service tier the stream named, in the
// contract's form (ServiceTierOf); "" until it names one.
func (t *tierSeen) ServiceTier() string { return t.tier }

// Observe takes one chunk of the stream into account.
func (s *StreamUsage) Observe(chunk sdk.ChatCompletionChunk) {
	if chunk.JSON.Usage.Valid() {
		s.usage, s.final = UsageOf(chunk.Usage), true
	}
	s.takeTier(string(chunk.ServiceTier))
	for _, c := range chunk.Choices {
		d := c.Delta
		if d.Content != "" || d.Refusal != "" || len(d.ToolCalls) > 0 || d.FunctionCall.Arguments != "" {
			s.chunks++
		}
	}
}

// Usage returns the usage of the last chunk when it arrived; otherwise
// the output counted so far, with no input (see StreamUsage).
func (s *StreamUsage) Usage() events.Usage {
	if s.final {
		return s.usage
	}
	return events.Usage{OutputTokens: s.chunks}
}

// Complete reports whether the usage chunk arrived, that is whether Usage
// is what the provider reported rather than a count of chunks.
func (s *StreamUsage) Complete() bool { return s.final }

// ResponseStreamUsage follows the usage of a Responses API stream:
// response.completed (or response.incomplete, response.failed) carries the
// response's usage. Before it, as for chat streams, the input is not
// knowable and the output is counted as one token per output delta event
// (text, refusal, reasoning, tool-call arguments; audio bytes are not
// counted), a lower bound when a delta carries more than one token.
//
// The zero value is ready to use; it belongs to the goroutine reading the
// stream.
type ResponseStreamUsage struct {
	usage  events.Usage
	final  bool
	deltas int64
	tierSeen
}

// Observe takes one event of the stream into account.
func (s *ResponseStreamUsage) Observe(ev responses.ResponseStreamEventUnion) {
	switch {
	case carriesResponse(ev.Type):
		s.takeTier(string(ev.Response.ServiceTier))
	case endsResponse(ev.Type):
		s.takeTier(string(ev.Response.ServiceTier))
		if ev.Response.JSON.Usage.Valid() {
			s.usage, s.final = ResponseUsageOf(ev.Response.Usage), true
		}
	case countsAsOutput(ev.Type):
		s.deltas++
	}
}

// Usage returns the response's usage when an event carried it; otherwise
// the output counted so far, with no input.
func (s *ResponseStreamUsage) Usage() events.Usage {
	if s.final {
		return s.usage
	}
	return events.Usage{OutputTokens: s.deltas}
}

// Complete reports whether the response's usage arrived.
func (s *ResponseStreamUsage) Complete() bool { return s.final }

// endsResponse reports whether an event of this type carries the whole
// response, usage included.
func endsResponse(typ string) bool {
	return typ == "response.completed" || typ == "response.incomplete" || typ == "response.failed"
}

// carriesResponse reports whether an event of this type carries the
// response so far (its service tier among the rest) without ending it.
func carriesResponse(typ string) bool {
	return typ == "response.created" || typ == "response.in_progress"
}

// countsAsOutput reports whether an event of this type carries generated
// output tokens.
func countsAsOutput(typ string) bool {
	return strings.HasPrefix(typ, "response.") && strings.HasSuffix(typ, ".delta") && typ != "response.audio.delta"
}
