package retry

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/testkit"
)

// sdkError stands for a provider SDK's HTTP error type.
type sdkError struct {
	Status int
	Header http.Header
	N      int // the attempt that got it, to tell errors apart
}

func (e *sdkError) Error() string { return "sdk: status " + strconv.Itoa(e.Status) }

// sdkClassifier is the provider classifier for sdkError.
var sdkClassifier = ClassifierFunc(func(err error, now time.Time) (Classification, bool) {
	var se *sdkError
	if !errors.As(err, &se) {
		return Classification{}, false
	}
	c := ClassifyHTTP(se.Status, se.Header, now)
	c.Message = se.Error()
	return c, true
})

func statusErr(status int, n int, kv ...string) error {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return &sdkError{Status: status, Header: h, N: n}
}

// constRand returns r on every draw.
func constRand(r float64) func() float64 { return func() float64 { return r } }

type harness struct {
	m     *Middleware
	sink  *MemorySink
	clock *testkit.Clock
}

// newHarness builds a middleware with a fake clock, a MemorySink, the SDK
// classifier, rand fixed at 0.75 (jitter factor 1+0.5*jitter) and the
// default policy; mod may change the options.
func newHarness(t *testing.T, mod func(*Options)) *harness {
	t.Helper()
	// The clock starts at the real time (to the millisecond), so that
	// context deadlines, which are real, can be compared with it.
	h := &harness{sink: NewMemorySink(), clock: testkit.NewClockNow()}
	opts := Options{
		Policy:     DefaultPolicy(),
		Classifier: Chain{sdkClassifier},
		Sink:       h.sink,
		Clock:      h.clock,
		Rand:       constRand(0.75),
	}
	if mod != nil {
		mod(&opts)
	}
	m, err := New(opts)
	require.NoError(t, err)
	h.m = m
	return h
}

var testCall = Call{SessionID: "sess-1", Provider: "anthropic", Model: "claude-test"}

// script returns an fn that plays one step per attempt (the last step
// repeats) and counts its calls.
type step struct {
	err     error
	report  Report
	advance time.Duration // how long the attempt takes on the fake clock
	wall    time.Duration // how far the wall clock alone steps during the attempt
	mono    time.Duration // how far the monotonic reading alone steps (a broken clock)
	panic   any           // when set, fn panics with it at the end of the attempt
	check   func(ctx context.Context, a Attempt)
}

type scripted struct {
	mu       sync.Mutex
	steps    []step
	clock    *testkit.Clock
	attempts []Attempt
}

func (s *scripted) fn(ctx context.Context, a Attempt) (string, Report, error) {
	s.mu.Lock()
	i := min(len(s.attempts), len(s.steps)-1)
	s.attempts = append(s.attempts, a)
	st := s.steps[i]
	s.mu.Unlock()
	if st.check != nil {
		st.check(ctx, a)
	}
	if s.clock != nil {
		s.clock.StepWall(st.wall)
		s.clock.StepMonotonic(st.mono)
		s.clock.Advance(st.advance)
	}
	if st.panic != nil {
		panic(st.panic)
	}
	if st.err != nil {
		return "", st.report, st.err
	}
	return "ok-" + strconv.Itoa(a.Number), st.report, nil
}

func (s *scripted) calls() []Attempt {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Attempt(nil), s.attempts...)
}

// requireCallEvents checks what every call's events share: one request and
// session, attempts numbered 0.., distinct ULID event_ids, the schema,
// exactly one final event and it is the last, and the error iff outcome
// error.
func requireCallEvents(t *testing.T, evs []events.Attempt, call Call) {
	t.Helper()
	require.NotEmpty(t, evs)
	seen := map[string]bool{}
	for i, ev := range evs {
		require.Equal(t, events.SchemaV1, ev.Schema, "event %d", i)
		require.Equal(t, i, ev.Attempt, "event %d", i)
		require.Equal(t, evs[0].RequestID, ev.RequestID, "event %d", i)
		require.Equal(t, call.SessionID, ev.SessionID, "event %d", i)
		require.Equal(t, call.Provider, ev.Provider, "event %d", i)
		require.Equal(t, call.Model, ev.Model, "event %d", i)
		require.NoError(t, events.ValidateID("event_id", ev.EventID))
		_, err := ulid.ParseStrict(ev.EventID)
		require.NoError(t, err, "event %d id %q", i, ev.EventID)
		require.False(t, seen[ev.EventID], "event %d reuses event_id %s", i, ev.EventID)
		seen[ev.EventID] = true
		require.Equal(t, i == len(evs)-1, ev.Final, "event %d final", i)
		require.Equal(t, ev.Outcome == events.OutcomeError, ev.Error != nil, "event %d error iff outcome error", i)
		require.False(t, ev.FinishedAt.Before(ev.StartedAt), "event %d ends before it starts", i)
		if ev.Error != nil {
			require.True(t, ev.Error.Kind.Valid(), "event %d kind %q", i, ev.Error.Kind)
			require.LessOrEqual(t, len(ev.Error.Message), events.MaxMessageBytes)
			require.NotEmpty(t, ev.Error.Message)
		}
		require.NoError(t, ev.Validate(), "event %d breaks the contract", i)
		data, err := events.Marshal(&ev)
		require.NoError(t, err)
		_, err = events.Decode(data)
		require.NoError(t, err, "event %d does not survive the wire", i)
		if ev.Error != nil {
			require.True(t, ev.Error.Status == 0 || ev.Error.Status >= 100 && ev.Error.Status <= 599)
		}
		if i > 0 {
			require.False(t, ev.StartedAt.Before(evs[i-1].FinishedAt), "event %d starts before %d ended", i, i-1)
		}
	}
}
