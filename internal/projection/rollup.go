package projection

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/names"
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
// Seq is the highest batch sequence that wrote it, Rules the RulesVersion
// of the code that wrote it.
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

// ErrNoRollups is returned by ReadRollups for a ledger without rollups
// (Names.Rollups empty).
var ErrNoRollups = errors.New("projection: the ledger has no rollups")

// RollupCell returns the request's rollup cell; ok is false for a record
// written before the rollups (no cell) or not yet created.
func (r *Request) RollupCell() (c Cell, ok bool) {
	if r.Cell == nil {
		return Cell{}, false
	}
	return Cell{Hour: r.Cell.Hour, Provider: r.Cell.Provider, Model: r.Cell.Model, Labels: r.Labels}, true
}

// hourLayout starts a rollup's key: the cell's hour, UTC.
const hourLayout = "2006010215"

// rollupKeyEncoding writes the hash of a rollup key: base32 without
// padding (A-Z, 2-7), which a KV key may hold.
var rollupKeyEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// Key returns the key of c's record in ledger_rollups:
// <YYYYMMDDHH>.<base32 of the SHA-256 of provider, model and the labels
// sorted by key, each length-prefixed>. It is deterministic, holds only
// characters a KV key may, and its hour prefix sorts by time (years 0 to
// 9999, all the contract allows), so a range of hours is a range of keys.
func (c Cell) Key() string {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	field := func(s string) {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		h.Write([]byte(s))
	}
	field(c.Provider)
	field(c.Model)
	for _, k := range slices.Sorted(maps.Keys(c.Labels)) {
		field(k)
		field(c.Labels[k])
	}
	var sum [sha256.Size]byte
	b := c.Hour.UTC().AppendFormat(make([]byte, 0, 64), hourLayout)
	b = append(b, '.')
	return string(rollupKeyEncoding.AppendEncode(b, h.Sum(sum[:0])))
}

// ReadRollups returns the rollups of the ledger whose bucket names are
// names (Names.Rollups; ErrNoRollups when it is empty), those whose hour
// is in [f.Since, f.Until), sorted by key (by hour first). A bucket not
// yet created holds none. Keys are listed from the server and the
// records read with batched direct gets (ReadAll): the keys outside the
// filter's hours are not read. Each record is whole; records of
// different cells may be of different batches while the aggregator
// writes.
func ReadRollups(ctx context.Context, js jetstream.JetStream, n Names, f RollupFilter) ([]Rollup, error) {
	if n.Rollups == "" {
		return nil, ErrNoRollups
	}
	// A cell's hour H is in [Since, Until) exactly when it is in
	// [ceil(Since), ceil(Until)), ceil rounding up to the hour.
	ceil := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Add(time.Hour - 1).Truncate(time.Hour).Format(hourLayout)
	}
	since, until := ceil(f.Since), ceil(f.Until)
	keep := func(key string) bool {
		if key == names.FenceKey || len(key) < len(hourLayout) {
			return false
		}
		h := key[:len(hourLayout)]
		return (since == "" || h >= since) && (until == "" || h < until)
	}
	var out []Rollup
	err := readKeys(ctx, js, n.Rollups, keep, func(key string, value []byte) error {
		var c Rollup
		if err := json.Unmarshal(value, &c); err != nil {
			return fmt.Errorf("%w: stored rollup %q is not readable: %v", ErrInvariant, key, err)
		}
		out = append(out, c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
