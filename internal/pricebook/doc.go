// Package pricebook owns the price catalogs of the ledger kept in KV
// bucket ledger_prices, so that every process (the aggregator, its
// standby, verify, rebuild, the report) prices with the same catalog.
//
// A catalog is the build's default catalog (pricing.Default) merged with
// a user's file; its version is the merged catalog's digest
// (pricing.Catalog.Version). `aggregator prices load FILE` stores the
// file under its version (key "catalog.<digest of the version>", written
// once, never edited) and makes it the current catalog (key "current");
// `aggregator prices` lists them.
//
// Loading a catalog does not by itself change what the live ledger prices
// with. The ledger records the version it prices with in its checkpoint
// (ledger_state); a writer of the ledger prices with that version, so two
// aggregators never mix versions in one ledger. An empty ledger adopts the
// current catalog when its first term begins. A newer current catalog is
// adopted by the running writer between two batches (it watches key
// "current", WatchCurrent), or when a lease term begins, only if it
// prices every attempt the ledger has applied as the recorded one does
// (ForwardOnly, judged against the latest started_at the ledger priced:
// it adds only prices that take effect after it); one that corrects a
// past price, or dates a new model's price before that, is adopted by a
// rebuild, which prices the whole history with the current catalog and
// whose switch records that version. Verify recomputes
// with the current catalog, so a loaded change that alters any recorded
// price shows as a drift in money until a rebuild.
//
// Book.Catalog rebuilds a version from its stored file and this build's
// default catalog and checks the version: a build whose default catalog
// differs cannot reproduce it and gets ErrUnavailable, and refuses to
// write rather than price with another catalog.
package pricebook
