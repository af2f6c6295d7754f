package fakeprovider

import (
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/provider/fakekit"
)

// FaultBilledError is a failure after the provider billed: a streamed
// answer that reports (and bills) the input usage, then an error event of
// a server error (Anthropic's api_error, Gemini's INTERNAL). On a request
// that does not stream the server bills the same and answers 500, which
// carries no usage: the client cannot know what it was billed. Only
// scripted servers inject it.
const FaultBilledError = fakekit.FaultBilledError

// Step is what a scripted server does with one request: Fault (FaultNone
// to succeed), the Usage the attempt reports and bills (for FaultNone,
// FaultBilledTimeout, FaultBilledError and FaultBrokenStream, which
// streams Usage's output tokens before the cut), and the RetryAfter of a
// rate limit.
type Step struct {
	Fault      Fault
	Usage      events.Usage
	RetryAfter time.Duration
}

// script answers requests with its steps, in the order they arrive.
type script struct {
	steps []Step
	next  atomic.Int64
	over  atomic.Int64 // requests that came after the last step
}

func (s *script) validate() error {
	for i, st := range s.steps {
		switch st.Fault {
		case FaultNone, FaultRateLimit, FaultOverload, FaultServerError, FaultBilledTimeout, FaultBilledError, FaultBadRequest,
			FaultBrokenStream:
		default:
			return fmt.Errorf("%w: script step %d: fault %q cannot be scripted", ErrInvalidOptions, i, st.Fault)
		}
	}
	return nil
}

// take returns the next step and its number; ok is false past the end.
func (s *script) take() (Step, int, bool) {
	n := int(s.next.Add(1) - 1)
	if n >= len(s.steps) {
		s.over.Add(1)
		return Step{}, n, false
	}
	return s.steps[n], n, true
}

// Unscripted is how many requests a scripted server received after its
// last step (each answered 500); 0 for a seeded server.
func (s *Server) Unscripted() int64 {
	if s.script == nil {
		return 0
	}
	return s.script.over.Load()
}

// Requests is how many requests the server has received, answered or
// not.
func (s *Server) Requests() int64 { return s.requests.Load() }

// scriptedCall identifies a request to a scripted server: its ledger
// headers when it has them, else the step's number as its attempt.
func scriptedCall(r *http.Request, step int) callID {
	if c, err := identify(r); err == nil {
		return c
	}
	return callID{SessionID: "scripted", RequestID: "scripted", Attempt: step}
}

// decide is what the attempt gets and the usage it would bill: the next
// step of the script, or the seeded plan's decision.
func (s *Server) decide(c callID, d *fakekit.Dialect) (Decision, events.Usage, bool) {
	if s.script == nil {
		return s.plan.Decide(c.RequestID, c.Attempt), s.plan.Usage(c.RequestID, d.CacheWrites), true
	}
	st, _, ok := s.script.take()
	return Decision{Fault: st.Fault, RetryAfter: st.RetryAfter}, st.Usage, ok
}

// unscripted answers a request that came after the script's last step.
func unscripted(w http.ResponseWriter, n int64) {
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusInternalServerError)
	_, _ = fmt.Fprintf(w, "fakeprovider: the script has no step for request %s\n", strconv.FormatInt(n, 10))
}
