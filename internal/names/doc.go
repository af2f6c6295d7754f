// Package names owns every name the ledger gives to NATS: its streams and
// their subjects, its KV buckets, and the keys it reserves in them. No
// other package spells one; docs/contract.md lists them for clients in
// other languages.
//
//	stream LEDGER_ATTEMPTS   ledger.attempts.<session_id>.<request_id>   every attempt (the source of truth)
//	stream LEDGER_REJECTED   ledger.rejected.<session_id>.<request_id>   every refused event, once
//	KV ledger_requests       <request_id>                                one record per request
//	KV ledger_sessions       <session_id>                                one rollup per session
//	KV ledger_state          checkpoint, lease, yield, rebuild, loss     the aggregator's own state
//	KV ledger_rebuild_<ULID>_*, stream LEDGER_REBUILD_<ULID>_REJECTED    a rebuild's own scratch ledger
//	KV ledger_verify_<ULID>_<use>                                        a verify's scratch buckets
//	KV ledger_gateway_attempts  <request_id>                             the gateway's attempt numbers
//	KV ledger_upstreams      <kind>.<upstream or process>                the fleet's guards
//
// The record buckets also hold FenceKey, the fence of the aggregator's
// lease term, which no ID can be.
package names
