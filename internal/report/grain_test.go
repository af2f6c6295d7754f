package report

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/projection"
)

// The planner reads the coarsest grain that answers a query exactly, and
// only the hours of a ledger whose coarser grains are not whole.
func TestQueryGrain(t *testing.T) {
	day, hour := projection.GrainDay, projection.GrainHour
	mh := projection.GrainModelHour
	d1, d2 := h0.Add(24*time.Hour), h0.Add(48*time.Hour)
	for _, tc := range []struct {
		by           string
		since, until time.Time
		all, want    projection.Grain // with and without all grains
	}{
		{by: "model", all: mh, want: hour},
		{by: "provider,day", all: mh, want: hour},
		{by: "model,hour", since: d1.Add(5 * time.Hour), until: d1.Add(7 * time.Hour), all: mh, want: hour},
		{by: "hour", since: d1.Add(time.Hour), all: mh, want: hour},
		{by: "label:team", all: day, want: hour},
		{by: "label:team,day", since: d1, until: d2, all: day, want: hour},
		{by: "label:team", since: d1, all: day, want: hour},
		{by: "model,label:user", until: d2, all: day, want: hour},
		{by: "label:team", since: d1.Add(time.Hour), all: hour, want: hour},
		{by: "label:team", until: d2.Add(23 * time.Hour), all: hour, want: hour},
		{by: "label:team,hour", all: hour, want: hour},
		{by: "label:team,hour", since: d1, until: d2, all: hour, want: hour},
		{by: "session", all: hour, want: hour},
		{by: "request,label:team", all: hour, want: hour},
	} {
		q := Query{By: mustBy(t, tc.by), Since: tc.since, Until: tc.until}
		require.NoError(t, q.Validate(), tc.by)
		require.Equal(t, tc.all, q.Grain(true), "%s %v %v, all grains", tc.by, tc.since, tc.until)
		require.Equal(t, tc.want, q.Grain(false), "%s %v %v, hours only", tc.by, tc.since, tc.until)
	}
}

// grainFleet is a small ledger over 100 hours from h0 (four days and
// part of a fifth), every user in a team, some requests without labels.
func grainFleet(rng *rand.Rand) []projection.Rollup {
	return genRollups(rng, fleet{requests: 4000, start: h0, hours: 100,
		models: []string{"gpt-4.1", "claude-sonnet-4-5", "gemini-2.5-flash"}, teams: 4, users: 11})
}

// inRange counts the cells of rs whose hour is in q's range.
func inRange(rs []projection.Rollup, q Query) int {
	n := 0
	for _, r := range rs {
		if q.in(r.Hour) {
			n++
		}
	}
	return n
}

// requireSameRows checks that got answers q as GroupRollups does over the
// hour cells hours.
func requireSameRows(t *testing.T, hours []projection.Rollup, q Query, got *Result, msg string) {
	t.Helper()
	want := GroupRollups(hours, q)
	require.Equal(t, want.Rows, got.Rows, msg)
	require.Equal(t, want.Groups, got.Groups, msg)
	require.Equal(t, want.Total, got.Total, msg)
}

// On a ledger whose every grain is whole, Answer reads the grain the
// planner chooses, only its cells in range (as many as an independent
// count of them), and answers every random query row for row as the hour
// cells do.
func TestAnswerReadsTheCoarsestGrain(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 13))
	hours := grainFleet(rng)
	byGrain := map[projection.Grain][]projection.Rollup{}
	for _, g := range projection.Grains {
		byGrain[g] = inGrains(hours, g)
	}
	require.Less(t, len(byGrain[projection.GrainDay]), len(hours)/2, "the day cells are fewer")
	require.Less(t, len(byGrain[projection.GrainModelHour]), len(hours)/2, "so are the model-hour cells")
	_, _, js := natstest.StartJS(t)
	storeLedger(t, js, allGrains(hours), 42, true)

	dims := []string{"model", "provider", "label:team", "label:user", "hour", "day"}
	seen := map[projection.Grain]int{}
	for i := range 80 {
		q := randomQuery(t, rng, dims, 100, rng.IntN(2) == 0)
		if rng.IntN(4) == 0 {
			q.Top = 1 + rng.IntN(5)
		}
		msg := dimList(q.By) + " " + q.Since.String() + " " + q.Until.String()
		r, err := Answer(t.Context(), js, q)
		require.NoError(t, err, "query %d %s", i, msg)
		require.Equal(t, q.Grain(true), r.Grain, "query %d %s", i, msg)
		require.Equal(t, inRange(byGrain[r.Grain], q), r.Cells, "query %d %s: the cells of its grain in range, no other", i, msg)
		require.EqualValues(t, 42, r.Applied)
		requireSameRows(t, hours, q, r, msg)
		hourly, err := answerRollups(t.Context(), js, q, projection.GrainHour)
		require.NoError(t, err)
		requireSameRows(t, hours, q, hourly, msg+", forced to hours")
		seen[r.Grain]++
	}
	require.Len(t, seen, 3, "every grain answered some query: %v", seen)
}

// A ledger projected before the grains has no all_grains in its
// checkpoint: whatever day and model-hour cells it holds (here, those of
// half the hours: incomplete, as a ledger upgraded mid-life has), Answer
// reads the hour cells, and its rows are theirs.
func TestAnswerWithoutAllGrainsReadsHours(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 19))
	hours := grainFleet(rng)
	partial := allGrains(hours[:len(hours)/2])[len(hours)/2:]
	for _, all := range []bool{false, true} {
		_, _, js := natstest.StartJS(t)
		storeLedger(t, js, append(partial, hours...), 7, all)
		for _, by := range []string{"model", "label:team", "model,day", "label:team,day"} {
			q := Query{By: mustBy(t, by), Since: h0.Add(24 * time.Hour)}
			r, err := Answer(t.Context(), js, q)
			require.NoError(t, err)
			if all {
				// The same store, told its grains are whole, answers
				// otherwise: the test would see a wrong grain read.
				require.NotEqual(t, projection.GrainHour, r.Grain, by)
				require.NotEqual(t, GroupRollups(hours, q).Total, r.Total, by)
				continue
			}
			require.Equal(t, projection.GrainHour, r.Grain, by)
			require.Equal(t, q.Grain(true), r.Coarser, by)
			require.NotEqual(t, projection.GrainHour, r.Coarser, by)
			require.Equal(t, inRange(hours, q), r.Cells, by)
			requireSameRows(t, hours, q, r, by)
			var b bytes.Buffer
			require.NoError(t, WriteRowsTable(&b, r))
			require.Contains(t, b.String(), "after `aggregator rebuild` the "+r.Coarser.String()+" cells answer this", by)
		}
	}
}

// --json names the grain of the rollups that answered, and no grain for
// the session or request records.
func TestWriteRowsJSONNamesTheGrain(t *testing.T) {
	for _, tc := range []struct {
		r    *Result
		want any
	}{
		{&Result{Query: Query{By: mustBy(t, "label:team")}, Source: FromRollups, Grain: projection.GrainDay}, "day"},
		{&Result{Query: Query{By: mustBy(t, "model")}, Source: FromRollups, Grain: projection.GrainModelHour}, "model_hour"},
		{&Result{Query: Query{By: mustBy(t, "label:team,hour")}, Source: FromRollups}, "hour"},
		{&Result{Query: Query{By: mustBy(t, "session")}, Source: FromSessions}, nil},
	} {
		var b bytes.Buffer
		require.NoError(t, WriteRowsJSON(&b, tc.r))
		var doc map[string]any
		require.NoError(t, json.Unmarshal(b.Bytes(), &doc), b.String())
		require.Equal(t, tc.want, doc["grain"], b.String())
	}
}
