package main

import "github.com/agentledger/ledger/internal/projection"

// limitMemory puts the process under the aggregator's soft memory limit
// (projection.LimitMemory; the GOMEMLIMIT environment variable overrides
// it, GOMEMLIMIT=off lifts it). Each command decides for itself: run and
// rebuild call it once their flags are parsed, since both run the
// projection whose working set the limit is sized for (rebuild projects
// the stream into scratch buckets with the same machinery, and cmd/bench
// measures both under the limit). The switch of a rebuild also keeps the
// set of keys it copied, which grows with the ledger; past the limit the
// garbage collector works harder, it never fails an allocation. report
// and wait read little and keep the runtime's default; verify sets its
// own.
func limitMemory() { projection.LimitMemory() }
