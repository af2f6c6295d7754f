package report

import (
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/agentledger/ledger/internal/projection"
)

// benchFleet is issue 20's ledger of 1M requests: 30 days of hours, four
// models of three providers, 20 teams, and users per team (1: the user
// label adds no cells; 5: every team's five users spread over every
// hour, the worst case for the number of cells short of one per request).
func benchFleet(usersPerTeam int) fleet {
	return fleet{requests: 1_000_000, start: h0, hours: 30 * 24,
		models: []string{"gpt-4.1", "gpt-4.1-mini", "claude-sonnet-4-5", "gemini-2.5-flash"}, teams: 20, users: 20 * usersPerTeam}
}

var benchRollups = sync.OnceValues(func() ([]projection.Rollup, []projection.Rollup) {
	rng := rand.New(rand.NewPCG(20, 20))
	return genRollups(rng, benchFleet(1)), genRollups(rng, benchFleet(5))
})

// benchQueries are the queries of the benchmarks: issue 20's questions.
func benchQueries(b *testing.B) map[string]Query {
	b.Helper()
	by := func(s string) []Dimension {
		ds, err := ParseBy(s)
		if err != nil {
			b.Fatal(err)
		}
		return ds
	}
	return map[string]Query{
		"model,day":                  {By: by("model,day")},
		"label:team,since-7d":        {By: by("label:team"), Since: h0.Add(23 * 24 * time.Hour)},
		"hour,top10,sort-overhead":   {By: by("hour"), Top: 10, Sort: SortOverhead},
		"label:user,top10,sort-cost": {By: by("label:user"), Top: 10, Sort: SortCost},
	}
}

// BenchmarkGroupAndPrint is the report path after the read: group the
// rollups of a 1M-request ledger, order, cut and print the table.
//
//	go test -run '^$' -bench GroupAndPrint -benchmem ./internal/report/
func BenchmarkGroupAndPrint(b *testing.B) {
	small, large := benchRollups()
	for _, ledger := range []struct {
		name string
		rs   []projection.Rollup
	}{{"1user-per-team", small}, {"5users-per-team", large}} {
		for name, q := range benchQueries(b) {
			b.Run(ledger.name+"/"+name, func(b *testing.B) {
				b.ReportMetric(float64(len(ledger.rs)), "cells")
				for b.Loop() {
					if err := WriteRowsTable(io.Discard, GroupRollups(ledger.rs, q)); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
