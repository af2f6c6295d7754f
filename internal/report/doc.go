// Package report owns the ledger report: reading the session rollups and
// printing them for people (a table) and for machines (JSON), with usage,
// billed and the retry overhead between them, in tokens and in money (the
// costs the projection recorded, each attempt at its own price, and the
// tokens no price covers), and apart from them the input estimated for
// streams cut before their usage.
package report
