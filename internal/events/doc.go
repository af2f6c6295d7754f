// Package events owns wire contract v1 of the usage ledger: the attempt
// event that retry workers publish for every try of a model call, the
// identifiers and subjects it travels under, and the decoder that is the
// single place that knows event versions and decides whether an event is
// valid (and, when it is not, which reject reason applies).
//
// The contract is documented for people in docs/contract.md; this package
// is its executable form. Everything here is pure: no I/O, no clock.
package events
