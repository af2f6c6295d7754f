// Package report owns the ledger report: reading the session rollups and
// printing them for people (a table) and for machines (JSON), with usage,
// billed and the retry overhead between them.
package report
