package bench

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/events"
)

// ErrInvalidSpec is wrapped by every error of Spec.Validate.
var ErrInvalidSpec = errors.New("bench: invalid workload spec")

// Spec is the shape of a workload.
type Spec struct {
	// Name is the workload's label in the results ("a", "b", "c").
	Name string
	// Events is the number of events generated, exactly.
	Events int
	// Sessions is the number of distinct sessions events are spread over.
	Sessions int
	// Requests, when positive, is the exact number of requests: every
	// request then has Events/Requests attempts (Events must be a
	// multiple). Zero selects the mixed shape: 20 % of requests with a
	// billed failed attempt then a success, 10 % with an unbilled
	// rate-limited attempt then a success, the rest one success (1.3
	// attempts per request).
	Requests int
	// HotSessions is the fraction of sessions that are hot and HotShare
	// the fraction of requests (hence, in expectation, of events) that go
	// to them. Zero HotSessions spreads requests uniformly.
	HotSessions, HotShare float64
	// Teams, when positive, labels every event of session i with
	// team=team-<i mod Teams>; Users likewise with user=user-<i mod
	// Users>, so that each user has Sessions/Users sessions. Zero leaves
	// the label out: with neither, events carry no labels (the rollups
	// then have one cell per hour, provider and model).
	Teams, Users int
}

// Labels names the label sets of --labels (BENCH_LABELS): "none"; "team",
// ten teams; "team,user", ten teams and a user for every ten sessions
// (users, like sessions, scaled with the workload).
var Labels = []string{"none", "team", "team,user"}

// WithLabels returns s labelled as mode, one of Labels.
func (s Spec) WithLabels(mode string) (Spec, error) {
	s.Teams, s.Users = 0, 0
	switch mode {
	case "none", "":
	case "team":
		s.Teams = 10
	case "team,user":
		s.Teams, s.Users = 10, max(1, s.Sessions/10)
	default:
		return s, fmt.Errorf("%w: %s: labels %q must be one of %s", ErrInvalidSpec, s.Name, mode, strings.Join(Labels, ", "))
	}
	return s, nil
}

// Validate reports a spec that cannot be generated.
func (s Spec) Validate() error {
	switch {
	case s.Events < 1:
		return fmt.Errorf("%w: %s: events %d must be at least 1", ErrInvalidSpec, s.Name, s.Events)
	case s.Sessions < 1:
		return fmt.Errorf("%w: %s: sessions %d must be at least 1", ErrInvalidSpec, s.Name, s.Sessions)
	case s.Requests < 0:
		return fmt.Errorf("%w: %s: requests %d must not be negative", ErrInvalidSpec, s.Name, s.Requests)
	case s.Requests > 0 && s.Events%s.Requests != 0:
		return fmt.Errorf("%w: %s: events %d must be a multiple of requests %d", ErrInvalidSpec, s.Name, s.Events, s.Requests)
	case s.Requests > 0 && s.Events/s.Requests > events.MaxAttempt:
		return fmt.Errorf("%w: %s: %d attempts per request is above %d", ErrInvalidSpec, s.Name, s.Events/s.Requests, events.MaxAttempt)
	case s.HotSessions < 0 || s.HotSessions > 1 || s.HotShare < 0 || s.HotShare > 1:
		return fmt.Errorf("%w: %s: hot sessions %v and hot share %v must be fractions from 0 to 1", ErrInvalidSpec, s.Name, s.HotSessions, s.HotShare)
	case s.Teams < 0 || s.Users < 0:
		return fmt.Errorf("%w: %s: teams %d and users %d must not be negative", ErrInvalidSpec, s.Name, s.Teams, s.Users)
	}
	return nil
}

// Standard returns the three workloads of the performance issue, their
// sizes multiplied by scale (at least 1 event, session and request each).
func Standard(scale float64) []Spec {
	n := func(v int) int { return max(1, int(float64(v)*scale)) }
	c := Spec{Name: "c", Events: 2 * n(500_000), Requests: n(500_000), Sessions: n(100_000)}
	return []Spec{
		{Name: "a", Events: n(1_000_000), Sessions: n(10_000)},
		{Name: "b", Events: n(1_000_000), Sessions: n(10_000), HotSessions: 0.01, HotShare: 0.8},
		c,
	}
}

// Epoch is the started_at of the first generated event; each event starts
// one millisecond after the previous one.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Generate calls fn with every event of s, in publication order, from a
// generator seeded with seed: the same spec and seed give the same events.
// fn may keep ev; the events of one session share one Labels map, which
// fn must not change. It stops at fn's first error and returns it.
func Generate(s Spec, seed uint64, fn func(ev *events.Attempt) error) error {
	if err := s.Validate(); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	entropy := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), byte(seed >> 24)})
	hot := 0
	if s.HotSessions > 0 {
		hot = max(1, int(float64(s.Sessions)*s.HotSessions))
	}
	labels := map[int]api.Labels{} // per session, shared by its events
	labelsOf := func(session int) api.Labels {
		if s.Teams == 0 && s.Users == 0 {
			return nil
		}
		l, ok := labels[session]
		if !ok {
			l = api.Labels{}
			if s.Teams > 0 {
				l["team"] = fmt.Sprintf("team-%d", session%s.Teams)
			}
			if s.Users > 0 {
				l["user"] = fmt.Sprintf("user-%d", session%s.Users)
			}
			labels[session] = l
		}
		return l
	}
	n := 0
	for req := 0; n < s.Events; req++ {
		var session int
		switch {
		case hot > 0 && hot < s.Sessions && rng.Float64() < s.HotShare:
			session = rng.IntN(hot)
		case hot > 0 && hot < s.Sessions:
			session = hot + rng.IntN(s.Sessions-hot)
		default:
			session = rng.IntN(s.Sessions)
		}
		var failures []bool // billed flag of each failed attempt before the success
		if s.Requests > 0 {
			failures = make([]bool, s.Events/s.Requests-1)
			for i := range failures {
				failures[i] = rng.IntN(5) == 0
			}
		} else {
			switch r := rng.IntN(10); {
			case r < 2:
				failures = []bool{true}
			case r < 3:
				failures = []bool{false}
			}
		}
		if left := s.Events - n; len(failures)+1 > left {
			failures = failures[:left-1]
		}
		sid := fmt.Sprintf("sess-%07d", session)
		rid := fmt.Sprintf("req-%09d", req)
		for i := 0; i <= len(failures); i++ {
			ev := attempt(n, sid, rid, i, entropy)
			ev.Labels = labelsOf(session)
			if i < len(failures) {
				ev.Outcome, ev.Final = events.OutcomeError, false
				if failures[i] {
					ev.Usage = events.Usage{InputTokens: 800}
					ev.Error = &events.AttemptError{Kind: events.KindServer, Status: 529, Retryable: true, Message: "overloaded"}
				} else {
					ev.Usage = events.Usage{}
					ev.Error = &events.AttemptError{Kind: events.KindRateLimit, Status: 429, Retryable: true, Message: "rate limited"}
				}
			}
			if err := fn(ev); err != nil {
				return err
			}
			n++
		}
	}
	return nil
}

// attempt is the n-th event of the stream, a success, attempt number i of
// request rid.
func attempt(n int, sid, rid string, i int, entropy *rand.ChaCha8) *events.Attempt {
	start := Epoch.Add(time.Duration(n) * time.Millisecond)
	id := ulid.MustNew(ulid.Timestamp(start), entropy)
	return &events.Attempt{
		Schema:            events.SchemaV1,
		EventID:           id.String(),
		RequestID:         rid,
		SessionID:         sid,
		Attempt:           i,
		Outcome:           events.OutcomeSuccess,
		Final:             true,
		Provider:          "anthropic",
		Model:             "claude-opus-4-5-20251101", // a dated ID: priced through its family
		Usage:             events.Usage{InputTokens: 1200, OutputTokens: 300, CacheReadInputTokens: 64},
		StartedAt:         start,
		FinishedAt:        start.Add(400 * time.Microsecond),
		ProviderRequestID: "req_" + rid,
	}
}
