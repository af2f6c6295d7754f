// Package sim owns the fleet simulator: a fleet of agents, each a goroutine
// owned by Fleet.Run, that work through sessions of model calls. Every call
// goes through the retry middleware (retry.Do) with the real SDK client of
// the session's provider, SDK retries off, against the fake provider of
// package fakeprovider, and every attempt becomes one event handed to a
// retry.Sink (emit's JetStream publisher in cmd/publisher, a
// retry.MemorySink in tests). The providers, their models and their SDK
// clients are those of the built-in providers' fake dialects
// (fakekit.Dialect.Sim, in each provider's folder): the simulator names
// none.
//
// Every call of a session carries one label, its team (search, ads or
// support, in turn), so that the rollups and `aggregator report --by
// label:team` have a label to answer by.
//
// The result of a run is the fake provider's ground truth (what it billed,
// per session and in total, and the usage of each logical call) next to the
// fleet's own counts of what it sent: the ledger downstream must arrive at
// the ground truth from the events alone.
//
// A run is deterministic given its Config (seed, run ID, sizes, fault mix,
// retry budget): the fake provider decides every attempt from the seed and
// the call's identity, so scheduling changes only the order of events, not
// the truth or the counts. Circuit breakers, rate limits and retry budgets
// would make the outcome depend on timing, so the fleet's breakers never
// open and nothing is limited unless Config.Breakers or Config.Guards
// supplies others (publisher simulate --fleet-limits).
//
// A fleet may be one process of several (Config.Shard) calling a fake
// provider another process serves (Config.ProviderURL); that process
// holds the truth.
package sim
