package openai

import (
	"net/http"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/provider/fakekit"
)

// chunk is one chat.completion.chunk; delta nil gives an empty delta,
// finish "" no finish reason. With includeUsage every chunk carries
// "usage": null, as the API sends them.
func (o fakeChatReply) chunk(c fakekit.Call, delta map[string]any, finish string) map[string]any {
	if delta == nil {
		delta = map[string]any{}
	}
	choice := map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": nil}
	if finish != "" {
		choice["finish_reason"] = finish
	}
	ch := map[string]any{
		"id":                 fakekit.RequestID("chatcmpl-", c),
		"object":             "chat.completion.chunk",
		"created":            fakeCreated,
		"model":              o.model,
		"system_fingerprint": "fp_fakeprovider",
		"choices":            []any{choice},
	}
	if o.includeUsage {
		ch["usage"] = nil
	}
	o.api.setTier(ch, c)
	return ch
}

// begin starts the stream with the role chunk and n content chunks of one
// token each.
func (o fakeChatReply) begin(w http.ResponseWriter, c fakekit.Call, n int64) (*fakekit.SSE, error) {
	w.Header().Set(RequestIDHeader, fakekit.RequestID("req_", c))
	ev := fakekit.StartSSE(w)
	if err := ev.Send("", o.chunk(c, map[string]any{"role": "assistant", "content": "", "refusal": nil}, "")); err != nil {
		return nil, err
	}
	for range n {
		if err := ev.Send("", o.chunk(c, map[string]any{"content": fakekit.Token}, "")); err != nil {
			return nil, err
		}
	}
	return ev, nil
}

// succeedStream streams the answer: the role, the text, the finish
// reason, the usage chunk when asked for, and [DONE].
func (o fakeChatReply) succeedStream(w http.ResponseWriter, c fakekit.Call, u events.Usage, finish string) error {
	ev, err := o.begin(w, c, 0)
	if err != nil {
		return err
	}
	if err := ev.Send("", o.chunk(c, map[string]any{"content": fakekit.ReplyText(c)}, "")); err != nil {
		return err
	}
	if err := ev.Send("", o.chunk(c, nil, finish)); err != nil {
		return err
	}
	if o.includeUsage {
		last := o.chunk(c, nil, "")
		last["choices"] = []any{}
		last["usage"] = fakeChatUsage(u)
		if err := ev.Send("", last); err != nil {
			return err
		}
	}
	return ev.SendRaw("[DONE]")
}

// StartStall begins a stream that bills u: the role chunk and one content
// chunk per output token (at most fakekit.MaxStalledChunks). The input it
// bills is in no chunk.
func (o fakeChatReply) StartStall(w http.ResponseWriter, c fakekit.Call, u events.Usage) error {
	_, err := o.begin(w, c, min(u.OutputTokens, fakekit.MaxStalledChunks))
	return err
}

// StreamError ends a stream with an error chunk, as the API does when a
// stream fails after it started.
func (o fakeChatReply) StreamError(w http.ResponseWriter) error {
	return fakekit.ResumeSSE(w).Send("", map[string]any{"error": map[string]any{"message": "The server had an error while processing your request.", "type": "server_error", "param": nil, "code": nil}})
}

func (o fakeChatReply) BreakStream(w http.ResponseWriter, c fakekit.Call, billed events.Usage) error {
	_, err := o.begin(w, c, billed.OutputTokens)
	return err
}

// Observed: a chat stream reports its usage only in its last chunk, so a
// stream that fails before it shows only its content chunks, one token
// each; the input is not observable.
func (o fakeChatReply) Observed(f fakekit.Fault, billed events.Usage) events.Usage {
	return fakeStreamObserved(f, billed)
}

// fakeStreamObserved is what a client can count of a failed stream that
// reports its usage only at its end: its content events, one token each.
func fakeStreamObserved(f fakekit.Fault, billed events.Usage) events.Usage {
	n := billed.OutputTokens
	if f != fakekit.FaultBrokenStream {
		n = min(n, fakekit.MaxStalledChunks)
	}
	return events.Usage{OutputTokens: n}
}
