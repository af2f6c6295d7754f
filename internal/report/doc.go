// Package report owns the ledger report: reading the session rollups and
// printing them for people (a table) and for machines (JSON), with usage,
// billed and the retry overhead between them, in tokens and in money (the
// costs the projection recorded, each attempt at its own price, and the
// tokens no price covers), and apart from them the input estimated for
// streams cut before their usage.
//
// It also answers by dimension and time (`aggregator report --by`, issue
// 20): a Query names dimensions (model, provider, label:KEY, hour, day,
// session, request), an hour range, an order and a cut, and Answer reads
// only what the query needs (Query.Source): the cell rollups of bucket
// ledger_rollups (projection.ReadRollups) for model, provider, labels
// and time, whatever the number of requests; the session records for
// session, each a session's whole life, so session combines with nothing
// else; and every request record only when request is named.
//
// Of the rollups it reads one grain, the coarsest that answers the query
// exactly (Query.Grain), and of it only the cells in range: a query
// without a label dimension reads the model-hour cells (an hour, a
// provider and a model, every label set summed; a day groups its hours);
// one with labels but without hour, whose --since and --until are open or
// at UTC day starts, the day cells (a day, a provider, a model, labels);
// any other the hour cells. The coarser grains are read only when the
// ledger says they hold every request (projection.LedgerRollupGrains: it
// was projected with them from its first event, or rebuilt since);
// otherwise every query reads the hour cells. Each grain counts every
// request once, so the rows are the same whichever grain answers;
// Result.Grain says which did (and --json's "grain").
//
// The grouping is a pure function of the records read (GroupRollups,
// GroupSessions, GroupRequests); WriteRowsTable, WriteRowsJSON and
// WriteCSV print its Result, the machine formats with stable column names
// (Columns) and money as integer nano-US-dollars beside a decimal string
// of dollars, never a float.
package report
