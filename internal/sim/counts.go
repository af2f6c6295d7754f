package sim

import (
	"context"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/retry"
)

// OutcomeSuccess is the key of Counts.Outcomes for successful attempts;
// failed ones are counted under their events.ErrorKind.
const OutcomeSuccess = "success"

// Counts are the fleet's own figures: what it asked for and which events
// it produced. They are taken from the events as they were handed to the
// sink, before the sink had a say, so they are what the ledger should
// receive.
type Counts struct {
	// Calls is the number of logical calls made (calls to retry.Do).
	Calls          int64 `json:"calls"`
	CallsSucceeded int64 `json:"calls_succeeded"`
	CallsFailed    int64 `json:"calls_failed"`
	// Attempts is the number of attempt events produced, one per attempt.
	Attempts int64 `json:"attempts"`
	// Retries is Attempts - Calls: the attempts after the first.
	Retries int64 `json:"retries"`
	// Outcomes counts the events by outcome: OutcomeSuccess or the error
	// kind.
	Outcomes map[string]int64 `json:"outcomes"`
	// Billed sums the usage of every event; Usage that of the successful
	// ones. They are what the events say the provider charged.
	Billed events.Usage `json:"billed"`
	Usage  events.Usage `json:"usage"`
	// SinkErrors is the number of events the sink refused.
	SinkErrors int64 `json:"sink_errors"`
	// Waits is the number of waits for rate-limit capacity before an
	// attempt (no attempts, no events).
	Waits int64 `json:"waits"`
}

// Add adds the figures of o (another process's) to c.
func (c *Counts) Add(o Counts) {
	c.Calls += o.Calls
	c.CallsSucceeded += o.CallsSucceeded
	c.CallsFailed += o.CallsFailed
	c.Attempts += o.Attempts
	c.Retries += o.Retries
	if c.Outcomes == nil {
		c.Outcomes = make(map[string]int64, len(o.Outcomes))
	}
	for k, v := range o.Outcomes {
		c.Outcomes[k] += v
	}
	c.Billed = c.Billed.Add(o.Billed)
	c.Usage = c.Usage.Add(o.Usage)
	c.SinkErrors += o.SinkErrors
	c.Waits += o.Waits
}

// Progress is a snapshot of a run under way.
type Progress struct {
	CallsDone  int64 // logical calls that ended, either way
	CallsTotal int64 // Sessions * CallsPerSession
	Attempts   int64 // events produced so far
	SinkErrors int64 // events the sink refused so far
}

// countingSink counts the events on their way to the sink. It is safe for
// concurrent use.
type countingSink struct {
	next retry.Sink

	attempts, sinkErrors atomic.Int64

	mu       sync.Mutex
	outcomes map[string]int64
	billed   events.Usage
	usage    events.Usage
}

func newCountingSink(next retry.Sink) *countingSink {
	return &countingSink{next: next, outcomes: make(map[string]int64)}
}

// Publish implements retry.Sink.
func (s *countingSink) Publish(ctx context.Context, ev *events.Attempt) error {
	outcome := OutcomeSuccess
	if ev.Outcome != events.OutcomeSuccess && ev.Error != nil {
		outcome = string(ev.Error.Kind)
	}
	s.mu.Lock()
	s.outcomes[outcome]++
	s.billed = s.billed.Add(ev.Usage)
	if ev.Outcome == events.OutcomeSuccess {
		s.usage = s.usage.Add(ev.Usage)
	}
	s.mu.Unlock()
	s.attempts.Add(1)
	err := s.next.Publish(ctx, ev)
	if err != nil {
		s.sinkErrors.Add(1)
	}
	return err
}

// fill copies the sink's figures into c.
func (s *countingSink) fill(c *Counts) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.Attempts = s.attempts.Load()
	c.SinkErrors = s.sinkErrors.Load()
	c.Outcomes = maps.Clone(s.outcomes)
	c.Billed = s.billed
	c.Usage = s.usage
	c.Retries = c.Attempts - c.Calls
}
