// Package topology owns the JetStream resources of the ledger: the attempt
// stream LEDGER_ATTEMPTS, the reject stream LEDGER_REJECTED, and the KV
// buckets of the projection. Whoever starts first (publisher or aggregator)
// creates what is missing through Ensure*; nothing here ever deletes or
// purges anything, and existing resources are left as they are.
package topology
