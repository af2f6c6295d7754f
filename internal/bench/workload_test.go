package bench

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
)

type shape struct {
	events, billed, finals int
	requests, sessions     map[string]int
}

func measure(t *testing.T, s Spec) shape {
	t.Helper()
	sh := shape{requests: map[string]int{}, sessions: map[string]int{}}
	seen := map[string]bool{}
	require.NoError(t, Generate(s, 7, func(ev *events.Attempt) error {
		data, err := events.Marshal(ev)
		require.NoError(t, err)
		got, err := events.Decode(data)
		require.NoError(t, err, "event %d", sh.events)
		require.NoError(t, events.CheckSubject(events.Subject(ev.SessionID, ev.RequestID), got))
		require.False(t, seen[ev.EventID], "duplicate event_id %s", ev.EventID)
		seen[ev.EventID] = true
		sh.events++
		sh.requests[ev.RequestID]++
		sh.sessions[ev.SessionID]++
		if ev.Outcome == events.OutcomeError && ev.Usage.InputTokens > 0 {
			sh.billed++
		}
		if ev.Final {
			sh.finals++
		}
		return nil
	}))
	return sh
}

func TestGenerateShapes(t *testing.T) {
	specs := Standard(0.02)
	tests := []struct {
		spec  Spec
		check func(t *testing.T, s Spec, sh shape)
	}{
		{specs[0], func(t *testing.T, s Spec, sh shape) {
			ratio := float64(sh.events) / float64(len(sh.requests))
			assert.InDelta(t, 1.3, ratio, 0.03, "attempts per request")
			assert.InDelta(t, 0.2, float64(sh.billed)/float64(len(sh.requests)), 0.02, "billed failures per request")
			assert.Greater(t, len(sh.sessions), s.Sessions*9/10)
		}},
		{specs[1], func(t *testing.T, s Spec, sh shape) {
			hot := 0
			for id, n := range sh.sessions {
				if id < "sess-0000002" { // sessions 0 and 1: the hot 1 % of 200
					hot += n
				}
			}
			assert.InDelta(t, 0.8, float64(hot)/float64(sh.events), 0.03, "share of events in the hot sessions")
		}},
		{specs[2], func(t *testing.T, s Spec, sh shape) {
			assert.Equal(t, s.Requests, len(sh.requests), "distinct requests")
			assert.Greater(t, len(sh.sessions), s.Sessions*8/10)
			for id, n := range sh.requests {
				require.Equal(t, 2, n, "attempts of %s", id)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.spec.Name, func(t *testing.T) {
			sh := measure(t, tt.spec)
			assert.Equal(t, tt.spec.Events, sh.events, "events")
			assert.Equal(t, len(sh.requests), sh.finals, "one final attempt per request")
			tt.check(t, tt.spec, sh)
		})
	}
}

func TestGenerateDeterministic(t *testing.T) {
	s := Spec{Name: "d", Events: 500, Sessions: 20}
	collect := func() []string {
		var ids []string
		require.NoError(t, Generate(s, 3, func(ev *events.Attempt) error {
			ids = append(ids, ev.EventID+ev.RequestID+ev.SessionID)
			return nil
		}))
		return ids
	}
	assert.Equal(t, collect(), collect())
}

func TestSpecValidate(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
	}{
		{"no events", Spec{Sessions: 1}},
		{"no sessions", Spec{Events: 1}},
		{"requests not a divisor", Spec{Events: 10, Sessions: 1, Requests: 3}},
		{"hot share above one", Spec{Events: 10, Sessions: 1, HotSessions: 0.1, HotShare: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.ErrorIs(t, Generate(tt.spec, 1, func(*events.Attempt) error { return nil }), ErrInvalidSpec)
		})
	}
}

func TestGenerateLabels(t *testing.T) {
	base := Spec{Name: "l", Events: 2000, Sessions: 40}
	tests := []struct {
		mode       string
		team, user bool
	}{
		{"none", false, false},
		{"team", true, false},
		{"team,user", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			s, err := base.WithLabels(tt.mode)
			require.NoError(t, err)
			teams, users := map[string]bool{}, map[string]bool{}
			require.NoError(t, Generate(s, 1, func(ev *events.Attempt) error {
				var session int
				_, err := fmt.Sscanf(ev.SessionID, "sess-%d", &session)
				require.NoError(t, err)
				if !tt.team && !tt.user {
					require.Nil(t, ev.Labels, ev.EventID)
					return nil
				}
				require.NoError(t, events.ValidateLabels(ev.Labels), ev.EventID)
				require.Equal(t, fmt.Sprintf("team-%d", session%10), ev.Labels["team"], ev.EventID)
				teams[ev.Labels["team"]] = true
				if tt.user {
					require.Equal(t, fmt.Sprintf("user-%d", session%4), ev.Labels["user"], ev.EventID)
					users[ev.Labels["user"]] = true
				} else {
					require.NotContains(t, ev.Labels, "user", ev.EventID)
				}
				return nil
			}))
			if tt.team {
				assert.Len(t, teams, 10)
			}
			if tt.user {
				assert.Len(t, users, 4, "a user for every ten sessions")
			}
		})
	}
	_, err := base.WithLabels("user")
	require.ErrorIs(t, err, ErrInvalidSpec)
	require.ErrorContains(t, err, `labels "user" must be one of none, team, team,user`)
	require.ErrorIs(t, Spec{Name: "n", Events: 1, Sessions: 1, Users: -1}.Validate(), ErrInvalidSpec)
}
