package projection

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/topology"
)

// rollupLedger stores, in the live rollups bucket of e after its fence
// marker, the cells of the grains gs holding the hour cells of two label
// sets for each of n hours from start (model m1 or m2 by hour), and
// returns them by grain.
func rollupLedger(t *testing.T, e *env, start time.Time, n int, gs ...Grain) map[Grain][]Rollup {
	t.Helper()
	ctx := context.Background()
	res, err := openResources(ctx, e.js, topology.Config{}, LiveNames(), nil)
	require.NoError(t, err)
	_, err = res.rollups.fence(ctx, 1)
	require.NoError(t, err)
	cells := map[Grain]map[string]*Rollup{}
	for h := range n {
		for _, labels := range []api.Labels{{"team": "a"}, {"team": "b", "user": "u-1"}} {
			c := Cell{Hour: start.Add(time.Duration(h) * time.Hour), Provider: "anthropic", Model: []string{"m1", "m2"}[h%2], Labels: labels}
			for _, g := range gs {
				if cells[g] == nil {
					cells[g] = map[string]*Rollup{}
				}
				k := c.In(g).Key()
				r, ok := cells[g][k]
				if !ok {
					r = &Rollup{Cell: c.In(g), Seq: 3, Rules: RulesVersion}
					cells[g][k] = r
				}
				r.Totals = r.Totals.Add(Totals{Requests: 1, Attempts: 2})
			}
		}
	}
	out := map[Grain][]Rollup{}
	var puts []put
	for g, byKey := range cells {
		for k, r := range byKey {
			out[g] = append(out[g], *r)
			puts = append(puts, put{key: k, value: r.appendJSON(nil)})
		}
	}
	require.NoError(t, res.rollups.putAll(ctx, puts, nil))
	return out
}

// keysOf returns the sorted keys of rs.
func keysOf(rs []Rollup) []string {
	keys := make([]string, len(rs))
	for i := range rs {
		keys[i] = rs[i].Key()
	}
	slices.Sort(keys)
	return keys
}

// ReadRollups of each grain returns exactly the cells of that grain whose
// hour (a day cell's: its day's first) is in [Since, Until), whole, for
// bounded ranges the server filters (one subject per hour or day, at most
// 512) and for open and longer ranges it filters by key; never the fence
// marker nor another grain's cells; and a range that matches no cell
// returns at once, empty.
func TestReadRollupsGrains(t *testing.T) {
	e := newEnv(t)
	start := t0.Add(-5 * time.Hour) // 07:00: the first and the last day are partial
	const hours = 600
	stored := rollupLedger(t, e, start, hours, Grains...)
	require.Equal(t, hours, len(stored[GrainModelHour]), "one model-hour cell an hour holds both label sets")
	require.Equal(t, 2*hours, len(stored[GrainHour]))
	require.Equal(t, 4*26, len(stored[GrainDay]), "a day cell per label set and model of each of 26 days")
	day0 := time.Date(start.Year(), start.Month(), start.Day(), 0, 0, 0, 0, time.UTC)
	end := start.Add(hours * time.Hour)
	at := func(h int) time.Time { return start.Add(time.Duration(h) * time.Hour) }
	for _, tc := range []struct {
		name     string
		f        RollupFilter
		subjects int // the subject filters for the hour grains (0: none, -1: every key)
		days     int // and for GrainDay
	}{
		{"open", RollupFilter{}, -1, -1},
		{"since", RollupFilter{Since: at(100)}, -1, -1},
		{"until", RollupFilter{Until: at(100)}, -1, -1},
		{"three hours", RollupFilter{Since: at(30), Until: at(33)}, 3, 0},
		{"inside hours", RollupFilter{Since: at(30).Add(time.Minute), Until: at(33).Add(time.Minute)}, 3, 0},
		{"two whole days", RollupFilter{Since: day0.Add(48 * time.Hour), Until: day0.Add(96 * time.Hour)}, 48, 2},
		{"512 hours", RollupFilter{Since: at(10), Until: at(522)}, 512, 22},
		{"513 hours", RollupFilter{Since: at(10), Until: at(523)}, -1, 22},
		{"every hour stored and more", RollupFilter{Since: day0, Until: end.Add(24 * time.Hour)}, -1, 27},
		{"600 days", RollupFilter{Since: day0.AddDate(0, 0, -300), Until: day0.AddDate(0, 0, 300)}, -1, -1},
		{"no cell there", RollupFilter{Since: end.Add(48 * time.Hour), Until: end.Add(60 * time.Hour)}, 12, 0},
		{"no cell those days", RollupFilter{Since: day0.AddDate(0, 0, 40), Until: day0.AddDate(0, 0, 42)}, 48, 2},
		{"no cell before", RollupFilter{Until: day0.Add(-time.Hour)}, -1, -1},
		{"within one hour", RollupFilter{Since: at(40).Add(time.Minute), Until: at(40).Add(2 * time.Minute)}, 0, 0},
	} {
		for _, g := range Grains {
			t.Run(tc.name+"/"+g.String(), func(t *testing.T) {
				f := tc.f
				f.Grain = g
				want := tc.subjects
				if g == GrainDay {
					want = tc.days
				}
				switch subs := grainSubjects(f); want {
				case -1:
					require.Equal(t, []string{keyPrefix[g] + "*.*"}, subs)
				default:
					require.Len(t, subs, want, "%v", subs)
				}
				var exp []Rollup
				for _, r := range stored[g] {
					if (f.Since.IsZero() || !r.Hour.Before(f.Since)) && (f.Until.IsZero() || r.Hour.Before(f.Until)) {
						exp = append(exp, r)
					}
				}
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // a hang fails, it does not block the suite
				defer cancel()
				got, err := ReadRollups(ctx, e.js, LiveNames(), f)
				require.NoError(t, err)
				require.Equal(t, keysOf(exp), keysOf(got))
				for _, r := range got {
					require.Equal(t, g, r.Grain)
					require.Equal(t, int64(r.Attempts), 2*r.Requests, "whole records")
				}
				// EachRollup hands over the same records, one at a time,
				// and stops at fn's first error.
				var each []Rollup
				require.NoError(t, EachRollup(ctx, e.js, LiveNames(), f, func(c *Rollup) error {
					each = append(each, *c)
					return nil
				}))
				require.ElementsMatch(t, got, each)
				if len(got) > 1 {
					stop, calls := errors.New("enough"), 0
					err := EachRollup(ctx, e.js, LiveNames(), f, func(*Rollup) error { calls++; return stop })
					require.ErrorIs(t, err, stop)
					require.Equal(t, 1, calls)
				}
			})
		}
	}
}

// A bucket holding only hour cells (a ledger projected before the grains)
// has no cell of the coarser grains: reading them, bounded or open,
// returns at once and empty, though the stream holds messages.
func TestReadRollupsOfAnAbsentGrain(t *testing.T) {
	e := newEnv(t)
	stored := rollupLedger(t, e, t0, 30, GrainHour)
	for _, g := range Grains {
		for _, f := range []RollupFilter{{Grain: g}, {Grain: g, Since: t0, Until: t0.Add(30 * time.Hour)}} {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			got, err := ReadRollups(ctx, e.js, LiveNames(), f)
			cancel()
			require.NoError(t, err, "%v", f)
			if g == GrainHour {
				require.Equal(t, keysOf(stored[g]), keysOf(got), "%v", f)
				continue
			}
			require.Empty(t, got, "%v", f)
		}
	}
}
