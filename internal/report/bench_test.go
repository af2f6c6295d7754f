package report

import (
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/projection"
	"github.com/agentledger/ledger/internal/topology"
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
	for _, ledger := range []benchLedger{{"1user-per-team", small}, {"5users-per-team", large}} {
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

// BenchmarkAnswer is the whole report path of `aggregator report --by` on
// a 1M-request ledger: its rollups stored in bucket ledger_rollups of an
// embedded JetStream server (file storage, as the projection writes
// them: Rollup's encoder, Cell.Key), then for each query read
// (projection.ReadRollups, only the hours in range), group, order, cut
// and print the table.
//
// cpu-ms/op is the CPU the process (report and server) spent per query,
// which a loaded machine does not stretch as it does the wall time.
//
// The ledger with 5 users a team (about 280,000 cells, the worst case
// short of one cell per request) runs only with LEDGER_BENCH_LARGE=1: it
// takes minutes to store and seconds a query.
//
//	go test -run '^$' -bench Answer -benchmem ./internal/report/
func BenchmarkAnswer(b *testing.B) {
	small, large := benchRollups()
	ledgers := []benchLedger{{"1user-per-team", small}}
	if os.Getenv("LEDGER_BENCH_LARGE") == "1" {
		ledgers = append(ledgers, benchLedger{"5users-per-team", large})
	}
	for _, ledger := range ledgers {
		b.Run(ledger.name, func(b *testing.B) {
			_, _, js := natstest.StartJS(b)
			putRollups(b, js, ledger.rs)
			for name, q := range benchQueries(b) {
				b.Run(name, func(b *testing.B) {
					b.ReportMetric(float64(len(ledger.rs)), "cells")
					cpu, n := processCPU(b), 0
					for b.Loop() {
						n++
						r, err := Answer(b.Context(), js, q)
						if err != nil {
							b.Fatal(err)
						}
						if err := WriteRowsTable(io.Discard, r); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64((processCPU(b)-cpu).Milliseconds())/float64(n), "cpu-ms/op")
				})
			}
		})
	}
}

// putRollups stores rs in bucket ledger_rollups as the projection does.
func putRollups(b *testing.B, js jetstream.JetStream, rs []projection.Rollup) {
	b.Helper()
	ctx := context.Background()
	if _, err := topology.EnsureBucket(ctx, js, topology.Config{}, names.RollupsBucket, ""); err != nil {
		b.Fatal(err)
	}
	for i := range rs {
		data, err := json.Marshal(&rs[i])
		if err != nil {
			b.Fatal(err)
		}
		if _, err := js.PublishAsync("$KV."+names.RollupsBucket+"."+rs[i].Key(), data); err != nil {
			b.Fatal(err)
		}
		if i%1000 == 999 || i == len(rs)-1 {
			select {
			case <-js.PublishAsyncComplete():
			case <-ctx.Done():
			}
		}
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
