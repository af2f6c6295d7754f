package projection

import (
	"context"
	"errors"
	"time"

	"github.com/agentledger/ledger/api"
	"github.com/nats-io/nats.go/jetstream"
)

// Cell is where a request is counted in the rollups (issue 20): the hour
// (UTC, truncated) and the provider, model and labels of its first
// accepted event in stream order, fixed for the life of the request as
// its session is.
type Cell struct {
	Hour     time.Time  `json:"hour"`
	Provider string     `json:"provider"`
	Model    string     `json:"model"`
	Labels   api.Labels `json:"labels,omitempty"`
}

// Rollup is one record of bucket ledger_rollups: the sums of the
// requests counted in one cell (Totals, as a session sums its requests).
type Rollup struct {
	Cell
	Totals
	Seq   uint64 `json:"seq"`
	Rules int    `json:"rules"`
}

// RollupFilter selects rollups by hour: Since inclusive, Until
// exclusive; a zero bound is open.
type RollupFilter struct {
	Since, Until time.Time
}

// ErrNoRollups is returned by ReadRollups until the rollups are built.
var ErrNoRollups = errors.New("projection: rollups not built yet")

// ReadRollups returns the cell rollups of the ledger whose bucket names
// are names, filtered by f.
func ReadRollups(ctx context.Context, js jetstream.JetStream, names Names, f RollupFilter) ([]Rollup, error) {
	return nil, ErrNoRollups
}
