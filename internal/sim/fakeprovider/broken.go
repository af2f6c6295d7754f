package fakeprovider

import (
	"net/http"

	"github.com/agentledger/ledger/internal/events"
)

// FaultBrokenStream starts a streamed answer, streams a few output tokens
// (one per content event) and then cuts the connection, without the
// answer's end. The attempt is billed its input and the tokens streamed;
// how much of that the client can know depends on the provider (see
// AttemptTruth.Unobservable). On a request that does not stream the
// server cuts the connection before answering, bills nothing and records
// FaultDisconnect instead.
const FaultBrokenStream Fault = "broken_stream"

// FaultDisconnect is the unbilled cut connection of a request that does
// not stream.
const FaultDisconnect Fault = "disconnect"

// MaxBrokenStreamTokens bounds the output tokens a broken stream streams
// before the cut.
const MaxBrokenStreamTokens = 16

// BreakAfter is how many output tokens a broken stream of the call's
// attempt streams before the cut: from 1 to the call's output, at most
// MaxBrokenStreamTokens.
func (p Plan) BreakAfter(requestID string, attempt int, output int64) int64 {
	return between(p.rng("break", requestID, attempt), 1, max(1, min(output, MaxBrokenStreamTokens)))
}

// usageShaper is a reply whose API bills other than the plan's usage (an
// embedding has no output).
type usageShaper interface {
	shape(u events.Usage) events.Usage
}

// observer is a reply that can say how much of what a failed stream
// billed its events report, or let a client count.
type observer interface {
	observed(f Fault, billed events.Usage) events.Usage
}

// streamBreaker is a reply that can stream tokens and break off.
type streamBreaker interface {
	// breakStream begins a streamed answer that bills billed, with
	// billed.OutputTokens content events.
	breakStream(w http.ResponseWriter, c callID, billed events.Usage) error
}

// recordStream books a failed streamed attempt with the part of billed
// its events do not report as unobservable.
func (s *Server) recordStream(c callID, provider, model string, f Fault, billed events.Usage, rep reply) {
	obs := billed
	if o, ok := rep.(observer); ok {
		obs = o.observed(f, billed)
	}
	s.ledger.recordPartly(c, provider, model, f, billed, billed.Sub(obs))
}

// breakStream answers a FaultBrokenStream.
func (s *Server) breakStream(w http.ResponseWriter, c callID, provider, model string, stream bool, usage events.Usage, rep reply) {
	b, ok := rep.(streamBreaker)
	if !stream || !ok {
		s.ledger.record(c, provider, model, FaultDisconnect, events.Usage{})
		panic(http.ErrAbortHandler) // net/http closes the connection without a response
	}
	billed := usage
	if s.script == nil {
		billed.OutputTokens = s.plan.BreakAfter(c.RequestID, c.Attempt, usage.OutputTokens)
	}
	s.recordStream(c, provider, model, FaultBrokenStream, billed, rep)
	if b.breakStream(w, c, billed) == nil {
		panic(http.ErrAbortHandler) // cut: no end of the stream
	}
}

// token is the text of one streamed output token.
const token = "tok "

// observed: message_start reports the input and the first output token;
// the text deltas that follow carry no counts, so what a broken stream
// generated after message_start is not observable.
func (a anthropicReply) observed(f Fault, billed events.Usage) events.Usage {
	if f == FaultBrokenStream {
		billed.OutputTokens = min(billed.OutputTokens, StalledOutputTokens)
	}
	return billed
}

func (a anthropicReply) breakStream(w http.ResponseWriter, c callID, billed events.Usage) error {
	start := billed
	start.OutputTokens = min(billed.OutputTokens, StalledOutputTokens)
	if err := a.startStall(w, c, start); err != nil {
		return err
	}
	ev := &sse{w: w, rc: http.NewResponseController(w)}
	if err := ev.send("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}}); err != nil {
		return err
	}
	for range billed.OutputTokens {
		if err := ev.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": token}}); err != nil {
			return err
		}
	}
	return nil
}

// Gemini's chunks each carry the running usage: everything is observable.
func (g geminiReply) breakStream(w http.ResponseWriter, c callID, billed events.Usage) error {
	ev := startSSE(w)
	for n := range billed.OutputTokens {
		u := billed
		u.OutputTokens = n + 1
		if err := ev.send("", g.chunk(c, token, "", u)); err != nil {
			return err
		}
	}
	return nil
}
