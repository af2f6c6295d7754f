// Package pricebook owns the price catalogs of the ledger kept in KV
// bucket ledger_prices, so that every process (the aggregator, its
// standby, verify, rebuild, the report) prices with the same catalog.
//
// A catalog is the build's default catalog (pricing.Default) merged with
// a user's file; its version is the merged catalog's digest
// (pricing.Catalog.Version). Each version is stored once, never edited,
// under key "catalog.<digest of the version>" (Entry): the resolved
// catalog, in the catalog file format pricing.Parse reads, with the
// user's file, the default's version and where it came from. Key
// "current" names the current version. `aggregator prices load FILE`
// stores the file over the default and makes it current (Load);
// `aggregator prices` lists them.
//
// Book.Catalog reads a version from its resolved catalog and checks the
// digest, so any build prices with any stored version whatever its own
// default. An entry stored before the resolved catalog was kept (the old
// form: the user's file only) is rebuilt from the file and this build's
// default, or one of the default catalogs of the builds that stored no
// resolved catalog (pricing.PastDefaults), which must give the version; a
// version never stored (the default alone of such a build) is one of
// those past defaults. Any other version gets ErrUnavailable, and its
// aggregator refuses to write rather than price with another catalog (a
// rebuild re-prices with the current one).
//
// A build's default catalog is a catalog change like a loaded file: when
// a writer's lease term begins it calls AdoptDefault, which merges the
// user's file of the current catalog (none: the default alone) over this
// build's default and, when that gives another version than the current
// one, stores it and makes it current; Pending says what it would make
// current, for verify and `aggregator prices`. So an upgrade whose default
// only adds models or future prices needs nothing else, and the builds of
// a rolling upgrade each price with what they can read. The term that
// begins last sets the current catalog from its own build's default.
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
// whose switch records that version. Verify recomputes with the current
// catalog, so a change that alters any recorded price (a loaded file, or
// a new build's default) shows as a drift in money until a rebuild.
package pricebook
