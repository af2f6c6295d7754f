package report

import (
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentledger/ledger/internal/natstest"
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

// benchLedger is a generated ledger's rollups, named.
type benchLedger struct {
	name string
	rs   []projection.Rollup
}

// benchQueries are the queries of the benchmarks: issue 20's questions
// on a ledger of 30 days from h0, "yesterday" its last day and "this
// week" its last 7 days.
func benchQueries(b *testing.B) map[string]Query {
	b.Helper()
	by := func(s string) []Dimension {
		ds, err := ParseBy(s)
		if err != nil {
			b.Fatal(err)
		}
		return ds
	}
	yesterday, week := h0.Add(29*24*time.Hour), h0.Add(23*24*time.Hour)
	return map[string]Query{
		"model,day":                  {By: by("model,day")},
		"label:team,since-7d":        {By: by("label:team"), Since: week},
		"hour,top10,sort-overhead":   {By: by("hour"), Top: 10, Sort: SortOverhead},
		"label:user,top10,sort-cost": {By: by("label:user"), Top: 10, Sort: SortCost},
		// what did gpt-4.1 cost yesterday, hour by hour
		"model,hour,yesterday": {By: by("model,hour"), Since: yesterday, Until: yesterday.Add(24 * time.Hour)},
		// which team retried most this week
		"label:team,sort-overhead,since-7d": {By: by("label:team"), Sort: SortOverhead, Since: week},
		// labels by hour need the hour cells, whatever the grains
		"label:team,hour,yesterday": {By: by("label:team,hour"), Since: yesterday, Until: yesterday.Add(24 * time.Hour)},
		// the worst case: every hour cell of the month
		"label:user,hour": {By: by("label:user,hour")},
	}
}

// BenchmarkGroupAndPrint is the report path after the read: group the
// rollups of a 1M-request ledger, order, cut and print the table.
//
//	go test -run '^$' -bench GroupAndPrint -benchmem ./internal/report/
func BenchmarkGroupAndPrint(b *testing.B) {
	small, large := benchRollups()
	for _, ledger := range []benchLedger{{"1user-per-team", small}, {"5users-per-team", large}} {
		for name, q := range benchQueries(b) {
			b.Run(ledger.name+"/"+name, func(b *testing.B) {
				for b.Loop() {
					if err := WriteRowsTable(io.Discard, GroupRollups(ledger.rs, q)); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(ledger.rs)), "cells")
			})
		}
	}
}

// BenchmarkAnswer is the whole report path of `aggregator report --by` on
// a 1M-request ledger: its rollups of every grain (the hour cells, and the
// day and model-hour cells that hold them) and a checkpoint saying every
// grain is whole stored in an embedded JetStream server (file storage,
// as the projection writes them: Rollup's encoder, Cell.Key), then for
// each query read (projection.ReadRollups: the grain Query.Grain chooses,
// only the hours or days in range), group, order, cut and print the
// table. Each query's name ends with the grain that answered it;
// cells-read is the records read, grain the grain's number (0 hour, 1
// day, 2 model_hour), cells the hour cells of the ledger. The same
// ledger's hour cells alone, with a checkpoint without all_grains (a
// ledger projected before the coarser grains, read by hours: what every
// query read before them), are the hours-only runs.
//
// cpu-ms/op is the CPU the process (report and server) spent per query,
// which a loaded machine does not stretch as it does the wall time.
//
// The ledger with 5 users a team (about 280,000 hour cells, the worst
// case short of one cell per request) runs only with
// LEDGER_BENCH_LARGE=1: it takes minutes to store.
//
//	go test -run '^$' -bench Answer -benchtime 3x ./internal/report/
func BenchmarkAnswer(b *testing.B) {
	small, large := benchRollups()
	ledgers := []benchLedger{{"1user-per-team", small}}
	if os.Getenv("LEDGER_BENCH_LARGE") == "1" {
		ledgers = append(ledgers, benchLedger{"5users-per-team", large})
	}
	for _, ledger := range ledgers {
		for _, all := range []bool{true, false} {
			stored, name := allGrains(ledger.rs), ledger.name+"/all-grains"
			if !all {
				stored, name = ledger.rs, ledger.name+"/hours-only"
			}
			b.Run(name, func(b *testing.B) { benchAnswer(b, stored, len(ledger.rs), all) })
		}
	}
}

// benchAnswer stores the cells rs of a ledger of hourCells hour cells and
// a checkpoint that says whether all its grains are whole, then answers
// each of benchQueries.
func benchAnswer(b *testing.B, rs []projection.Rollup, hourCells int, all bool) {
	_, _, js := natstest.StartJS(b)
	storeLedger(b, js, rs, 1, all)
	for name, q := range benchQueries(b) {
		b.Run(name+"/grain="+q.Grain(all).String(), func(b *testing.B) {
			cpu, n := processCPU(b), 0
			var r *Result
			for b.Loop() {
				n++
				var err error
				if r, err = Answer(b.Context(), js, q); err != nil {
					b.Fatal(err)
				}
				if err := WriteRowsTable(io.Discard, r); err != nil {
					b.Fatal(err)
				}
			}
			// After the loop: b.Loop's start deletes the metrics reported before it.
			b.ReportMetric(float64((processCPU(b)-cpu).Milliseconds())/float64(n), "cpu-ms/op")
			b.ReportMetric(float64(hourCells), "cells")
			b.ReportMetric(float64(r.Cells), "cells-read")
			b.ReportMetric(float64(r.Grain), "grain")
		})
	}
}

// processCPU is the CPU time (user and system) the process has used so
// far: the report's and the embedded server's, which share the process.
// Per query it is what the answer costs whatever else runs on the
// machine, which stretches the wall time.
func processCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
