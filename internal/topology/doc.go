// Package topology owns the JetStream resources of the ledger: the attempt
// stream LEDGER_ATTEMPTS, the reject stream LEDGER_REJECTED, and the KV
// buckets of the projection. Whoever starts first (publisher or aggregator)
// creates what is missing through Ensure*; nothing here ever deletes or
// purges anything, and existing resources are left as they are.
//
// The settings of an existing resource are part of the topology: Check
// and Compare report each one that differs from what a process asks for
// (replicas, duplicate window, max age) and, for the record buckets, from
// the ledger's rules (TTL none, history 1, file storage, max value size
// unlimited), each with the nats CLI command that fixes it. A difference
// is warned about, except a bucket TTL or history, which would break
// exactly-once: EnsureBucket refuses such a bucket (SettingsError), so
// the aggregator, a rebuild and verify do not start on it.
package topology
