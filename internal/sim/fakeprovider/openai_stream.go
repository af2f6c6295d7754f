package fakeprovider

import (
	"net/http"

	"github.com/agentledger/ledger/internal/events"
)

// maxStalledChunks bounds the content chunks a stream sends before it
// stalls or fails.
const maxStalledChunks = 64

// chunk is one chat.completion.chunk; delta nil gives an empty delta,
// finish "" no finish reason. With includeUsage every chunk carries
// "usage": null, as the API sends them.
func (o openaiReply) chunk(c callID, delta map[string]any, finish string) map[string]any {
	if delta == nil {
		delta = map[string]any{}
	}
	choice := map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": nil}
	if finish != "" {
		choice["finish_reason"] = finish
	}
	ch := map[string]any{
		"id":                 providerRequestID("chatcmpl-", c),
		"object":             "chat.completion.chunk",
		"created":            openaiCreated,
		"model":              o.model,
		"system_fingerprint": "fp_fakeprovider",
		"choices":            []any{choice},
	}
	if o.includeUsage {
		ch["usage"] = nil
	}
	return ch
}

// begin starts the stream with the role chunk and n content chunks of one
// token each.
func (o openaiReply) begin(w http.ResponseWriter, c callID, n int64) (*sse, error) {
	w.Header().Set("x-request-id", providerRequestID("req_", c))
	ev := startSSE(w)
	if err := ev.send("", o.chunk(c, map[string]any{"role": "assistant", "content": "", "refusal": nil}, "")); err != nil {
		return nil, err
	}
	for range n {
		if err := ev.send("", o.chunk(c, map[string]any{"content": token}, "")); err != nil {
			return nil, err
		}
	}
	return ev, nil
}

// succeedStream streams the answer: the role, the text, the finish
// reason, the usage chunk when asked for, and [DONE].
func (o openaiReply) succeedStream(w http.ResponseWriter, c callID, u events.Usage, finish string) error {
	ev, err := o.begin(w, c, 0)
	if err != nil {
		return err
	}
	if err := ev.send("", o.chunk(c, map[string]any{"content": replyText(c)}, "")); err != nil {
		return err
	}
	if err := ev.send("", o.chunk(c, nil, finish)); err != nil {
		return err
	}
	if o.includeUsage {
		last := o.chunk(c, nil, "")
		last["choices"] = []any{}
		last["usage"] = openaiUsage(u)
		if err := ev.send("", last); err != nil {
			return err
		}
	}
	return ev.sendRaw("[DONE]")
}

// startStall begins a stream that bills u: the role chunk and one content
// chunk per output token (at most maxStalledChunks). The input it bills
// is in no chunk.
func (o openaiReply) startStall(w http.ResponseWriter, c callID, u events.Usage) error {
	_, err := o.begin(w, c, min(u.OutputTokens, maxStalledChunks))
	return err
}

// streamError ends a stream with an error chunk, as the API does when a
// stream fails after it started.
func (o openaiReply) streamError(w http.ResponseWriter) error {
	ev := &sse{w: w, rc: http.NewResponseController(w)}
	return ev.send("", map[string]any{"error": map[string]any{"message": "The server had an error while processing your request.", "type": "server_error", "param": nil, "code": nil}})
}

func (o openaiReply) breakStream(w http.ResponseWriter, c callID, billed events.Usage) error {
	_, err := o.begin(w, c, billed.OutputTokens)
	return err
}

// observed: a chat stream reports its usage only in its last chunk, so a
// stream that fails before it shows only its content chunks, one token
// each; the input is not observable.
func (o openaiReply) observed(f Fault, billed events.Usage) events.Usage {
	n := billed.OutputTokens
	if f != FaultBrokenStream {
		n = min(n, maxStalledChunks)
	}
	return events.Usage{OutputTokens: n}
}
