package report

import (
	"time"

	"github.com/agentledger/ledger/internal/projection"
)

// Grain returns the grain of the rollups (projection.Grain) that answers
// q exactly with the fewest cells, given whether every grain of the
// ledger holds every request (projection.LedgerRollupGrains):
//
//   - not all grains: GrainHour, the only grain such a ledger has whole;
//   - no label dimension: GrainModelHour, whose cells are an hour, a
//     provider and a model (every label set summed), which is all model,
//     provider, hour and day (a day groups its hours) and any range of
//     whole hours need;
//   - a label dimension, no hour dimension, and --since and --until each
//     open or at a UTC day's start: GrainDay, whose cells are a day, a
//     provider, a model and labels, and a day is in the range exactly
//     when all its hours are;
//   - otherwise GrainHour: an hour dimension with labels, or a bound
//     inside a day, needs the hours.
//
// Each grain counts every request once, so GroupRollups gives the same
// rows from the cells of the grain Grain returns as from the hour cells.
// q must be valid; for a query that does not read the rollups (Source),
// the grain means nothing and Grain returns GrainHour.
func (q Query) Grain(allGrains bool) projection.Grain {
	if !allGrains || q.Source() != FromRollups {
		return projection.GrainHour
	}
	labels, hour := false, false
	for _, d := range q.By {
		labels = labels || d.Kind == ByLabel
		hour = hour || d.Kind == ByHour
	}
	switch {
	case !labels:
		return projection.GrainModelHour
	case !hour && dayStart(q.Since) && dayStart(q.Until):
		return projection.GrainDay
	}
	return projection.GrainHour
}

// dayStart reports whether t is open (zero) or a UTC day's first instant.
func dayStart(t time.Time) bool {
	if t.IsZero() {
		return true
	}
	u := t.UTC()
	return u.Equal(time.Date(u.Year(), u.Month(), u.Day(), 0, 0, 0, 0, time.UTC))
}
