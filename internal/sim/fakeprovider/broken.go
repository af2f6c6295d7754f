package fakeprovider

import (
	"net/http"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/provider/fakekit"
)

// FaultBrokenStream starts a streamed answer, streams a few output tokens
// (one per content event) and then cuts the connection, without the
// answer's end. The attempt is billed its input and the tokens streamed;
// how much of that the client can know depends on the provider (see
// AttemptTruth.Unobservable). On a request that does not stream the
// server cuts the connection before answering, bills nothing and records
// FaultDisconnect instead.
const FaultBrokenStream = fakekit.FaultBrokenStream

// FaultDisconnect is the unbilled cut connection of a request that does
// not stream.
const FaultDisconnect = fakekit.FaultDisconnect

// MaxBrokenStreamTokens bounds the output tokens a broken stream streams
// before the cut.
const MaxBrokenStreamTokens = 16

// BreakAfter is how many output tokens a broken stream of the call's
// attempt streams before the cut: from 1 to the call's output, at most
// MaxBrokenStreamTokens.
func (p Plan) BreakAfter(requestID string, attempt int, output int64) int64 {
	return between(p.rng("break", requestID, attempt), 1, max(1, min(output, MaxBrokenStreamTokens)))
}

// recordStream books a failed streamed attempt with the part of billed
// its events do not report as unobservable.
func (s *Server) recordStream(c callID, provider, model string, f Fault, billed events.Usage, rep fakekit.Reply) {
	obs := billed
	if o, ok := rep.(fakekit.Observer); ok {
		obs = o.Observed(f, billed)
	}
	s.ledger.recordPartly(c, provider, model, f, billed, billed.Sub(obs))
}

// breakStream answers a FaultBrokenStream.
func (s *Server) breakStream(w http.ResponseWriter, c callID, provider, model string, stream bool, usage events.Usage, rep fakekit.Reply) {
	b, ok := rep.(fakekit.Breaker)
	if !stream || !ok {
		s.ledger.record(c, provider, model, FaultDisconnect, events.Usage{})
		panic(http.ErrAbortHandler) // net/http closes the connection without a response
	}
	billed := usage
	if s.script == nil {
		billed.OutputTokens = s.plan.BreakAfter(c.RequestID, c.Attempt, usage.OutputTokens)
	}
	s.recordStream(c, provider, model, FaultBrokenStream, billed, rep)
	if b.BreakStream(w, c, billed) == nil {
		panic(http.ErrAbortHandler) // cut: no end of the stream
	}
}
