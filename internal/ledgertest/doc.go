// Package ledgertest owns test workloads whose ledger is known by
// construction: logical calls with retries (billed and unbilled failed
// attempts), duplicates redelivered without dedup, and the per-request and
// per-session totals a correct projection must give. It is imported by
// tests only.
package ledgertest
