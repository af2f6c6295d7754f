package names

// Streams and their subjects (wire contract v1).
const (
	AttemptsStream   = "LEDGER_ATTEMPTS"
	AttemptsSubjects = "ledger.attempts.>"
	// AttemptsPrefix + <session_id>.<request_id> is an attempt's subject.
	AttemptsPrefix = "ledger.attempts."

	RejectedStream   = "LEDGER_REJECTED"
	RejectedSubjects = "ledger.rejected.>"
	// RejectedPrefix + the refused event's subject tokens is a
	// rejection's subject.
	RejectedPrefix = "ledger.rejected."
)

// The live ledger's buckets.
const (
	RequestsBucket = "ledger_requests"
	SessionsBucket = "ledger_sessions"
	// StateBucket holds the aggregator's own state: CheckpointKey,
	// LeaseKey, YieldKey, RebuildKey and LossKey.
	StateBucket = "ledger_state"
)

// PricesBucket holds the price catalogs by version and the current one
// (package pricebook); the ledger records in its checkpoint the version
// it prices with.
const PricesBucket = "ledger_prices"

// A rebuild's scratch ledger, which it projects the stream into before it
// switches the live ledger over. Each rebuild has its own, named for it
// (RebuildScratch): buckets ledger_rebuild_<ULID>_requests, _sessions and
// _state, and stream LEDGER_REBUILD_<ULID>_REJECTED on subjects
// ledger.rebuild.<ULID>.rejected.>. A build before scratch sets were named
// per rebuild used the same names without "<ULID>_" ("<ULID>." in the
// subjects); a rebuild deletes such a set like any other it no longer needs.
const (
	RebuildBucketPrefix = "ledger_rebuild_"
	RebuildStreamPrefix = "LEDGER_REBUILD_"
)

// RebuildScratch returns the names of the scratch ledger of the rebuild
// id (a ULID; "" is the single set of earlier builds).
func RebuildScratch(id string) (requests, sessions, state, rejected, rejectedPrefix string) {
	b, s, p := RebuildBucketPrefix, RebuildStreamPrefix, "ledger.rebuild."
	if id != "" {
		b, s, p = b+id+"_", s+id+"_", p+id+"."
	}
	return b + "requests", b + "sessions", b + "state", s + "REJECTED", p + "rejected."
}

// RebuildScratchRollups returns the name of the rollups bucket of the
// scratch ledger of the rebuild id, beside those of RebuildScratch:
// ledger_rebuild_<id>_rollups.
func RebuildScratchRollups(id string) string {
	if id == "" {
		return RebuildBucketPrefix + "rollups"
	}
	return RebuildBucketPrefix + id + "_rollups"
}

// Keys the ledger reserves.
const (
	// CheckpointKey (in a state bucket): the last event applied, the
	// lease term and rules that applied it, and a rebuild's switch.
	CheckpointKey = "checkpoint"
	// LeaseKey: the aggregator's lease; YieldKey: a request that its
	// holder hand it over; RebuildKey: the claim of the one rebuild.
	LeaseKey   = "lease"
	YieldKey   = "yield"
	RebuildKey = "rebuild"
	// LossKey: the ranges of stream sequences a rebuild run with
	// --accept-loss found gone from LEDGER_ATTEMPTS and rebuilt the
	// ledger without (JSON {"ranges":[{"from","to","recorded_at","by"}]}).
	LossKey = "loss"
	// FenceKey (in each record bucket): the delete marker a lease term
	// begins with; no request or session ID can be it (IDs have no '.').
	FenceKey = "ledger.fence"
)

// Verify's scratch buckets: VerifyScratchPrefix + <ULID>_<use>, each with
// VerifyHeartbeatKey, which its verify rewrites while it runs.
const (
	VerifyScratchPrefix = "ledger_verify_"
	VerifyHeartbeatKey  = "verify.alive"
)

// GatewayAttemptsBucket holds, per request ID a client named, the next
// attempt number no gateway replica has used.
const GatewayAttemptsBucket = "ledger_gateway_attempts"

// UpstreamsBucket holds the fleet's shared guards; a key is
// <kind>.<encoded upstream> (or process.<process>), kind one of these.
const (
	UpstreamsBucket = "ledger_upstreams"

	UpstreamBreaker  = "breaker"
	UpstreamLimits   = "limits"
	UpstreamHold     = "hold"
	UpstreamCapacity = "capacity"
	UpstreamBudget   = "budget"
	UpstreamProcess  = "process"
)

// RollupsBucket holds the totals per hour and cell (provider, model,
// labels) and per hour and session: the rollups the report answers
// from (issue 20).
const RollupsBucket = "ledger_rollups"
