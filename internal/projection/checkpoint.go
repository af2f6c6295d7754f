package projection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/names"
)

// checkpoint is the value of names.CheckpointKey.
type checkpoint struct {
	Seq uint64 `json:"seq"`
	// Term is the lease revision of the term that last wrote it.
	Term uint64 `json:"term,omitempty"`
	// Rules is the RulesVersion of the ledger: the newest rules that have
	// written it (0: written before rules were versioned).
	Rules int `json:"rules,omitempty"`
	// Prices is the version of the price catalog the ledger prices with
	// (pricebook); "" before the ledger was first priced.
	Prices string `json:"prices,omitempty"`
	// PricedThrough is the latest started_at of the attempts the ledger
	// has priced, rounded up to the second, or pricedUnknown (see
	// startedMark); zero when none.
	PricedThrough time.Time `json:"priced_through,omitzero"`
	// AllGrains reports that every grain of the rollups holds every
	// request: the ledger was projected with them from its first event
	// (or rebuilt since). Without it, only GrainHour is written, and it
	// is all a report may read.
	AllGrains bool `json:"all_grains,omitempty"`
	// Switch is a rebuild's switch in progress, if any.
	Switch *switchRecord `json:"switch,omitempty"`
}

// switchRecord is a switch of the live ledger to a rebuilt one: the
// scratch projection at Checkpoint is copied over the live ledger.
// Whoever holds the live lease next finishes the copy before anything
// else, from the intact scratch copy; the counts let it check that the
// scratch copy is intact before it copies anything.
type switchRecord struct {
	Checkpoint uint64 `json:"checkpoint"`
	Scratch    Names  `json:"scratch"`
	// Rules is the RulesVersion of the rebuild; the ledger has it once the
	// switch is done.
	Rules int `json:"rules,omitempty"`
	// Prices is the catalog version the rebuild priced with; the ledger
	// has it once the switch is done.
	Prices string `json:"prices,omitempty"`
	// PricedThrough is the rebuild's (checkpoint.PricedThrough); the
	// ledger has it once the switch is done.
	PricedThrough time.Time `json:"priced_through,omitzero"`
	// AllGrains is the rebuild's (checkpoint.AllGrains); the ledger has it
	// once the switch is done.
	AllGrains bool `json:"all_grains,omitempty"`
	// Messages in the scratch buckets' and rejection stream's streams when
	// the switch was recorded (the scratch projection had stopped).
	Requests uint64 `json:"requests_msgs"`
	Sessions uint64 `json:"sessions_msgs"`
	Rejected uint64 `json:"rejected_msgs"`
	Rollups  uint64 `json:"rollups_msgs,omitempty"` // 0 for a scratch set without rollups
}

// ledgerRules is the rules version a writer must have to write the
// ledger: the checkpoint's, or a pending switch's if newer.
func (c *checkpoint) ledgerRules() int {
	r := c.Rules
	if c.Switch != nil {
		r = max(r, c.Switch.Rules)
	}
	return r
}

// readCheckpoint returns the stored checkpoint and its revision (a zero
// checkpoint and revision 0 when there is none).
func readCheckpoint(ctx context.Context, state jetstream.KeyValue) (checkpoint, uint64, error) {
	e, err := state.Get(ctx, names.CheckpointKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return checkpoint{}, 0, nil
	}
	if err != nil {
		return checkpoint{}, 0, fmt.Errorf("projection: reading checkpoint: %w", err)
	}
	var c checkpoint
	if err := json.Unmarshal(e.Value(), &c); err != nil {
		return checkpoint{}, 0, fmt.Errorf("%w: checkpoint %q is not readable: %v", ErrInvariant, e.Value(), err)
	}
	return c, e.Revision(), nil
}

// ReadCheckpoint returns the stream sequence up to which the live
// projection has applied every event (0 when nothing is applied yet).
func ReadCheckpoint(ctx context.Context, js jetstream.JetStream) (uint64, error) {
	c, err := readLiveCheckpoint(ctx, js)
	return c.Seq, err
}

func readLiveCheckpoint(ctx context.Context, js jetstream.JetStream) (checkpoint, error) {
	state, err := js.KeyValue(ctx, names.StateBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return checkpoint{}, nil
	}
	if err != nil {
		return checkpoint{}, fmt.Errorf("projection: opening %s: %w", names.StateBucket, err)
	}
	c, _, err := readCheckpoint(ctx, state)
	return c, err
}

// LedgerRollupGrains reports whether every grain of the live ledger's
// rollups holds every request (checkpoint.AllGrains): then a report may
// read the coarser grains; otherwise only GrainHour, the one a ledger
// projected before the grains (RulesVersion 7) has, until a rebuild.
func LedgerRollupGrains(ctx context.Context, js jetstream.JetStream) (bool, error) {
	c, err := readLiveCheckpoint(ctx, js)
	return c.AllGrains, err
}

// Switching reports whether a rebuild's switch of the live ledger is in
// progress (or was interrupted and not yet completed).
func Switching(ctx context.Context, js jetstream.JetStream) (bool, error) {
	c, err := readLiveCheckpoint(ctx, js)
	return c.Switch != nil, err
}

// LedgerRules returns the rules version of the live ledger (0 when it was
// written before rules were versioned, or is empty).
func LedgerRules(ctx context.Context, js jetstream.JetStream) (int, error) {
	c, err := readLiveCheckpoint(ctx, js)
	return c.ledgerRules(), err
}

// LedgerPrices returns the version of the price catalog the live ledger
// prices with ("" when it is empty or was written before pricing).
func LedgerPrices(ctx context.Context, js jetstream.JetStream) (string, error) {
	c, err := readLiveCheckpoint(ctx, js)
	return c.Prices, err
}

// mustJSON encodes a value of this package's own types, which always
// encode.
func mustJSON(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("projection: encoding %T: %v", v, err))
	}
	return data
}
