package projection

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
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
// is in [f.Since, f.Until), in no particular order. A bucket not yet
// created holds none. It reads the bucket's stream once with an ordered
// consumer that starts at the last message of every key, so tens of
// thousands of cells come in a few large pulls; the hour filter is
// applied to the key before a record is decoded. Each record is whole;
// records of different cells may be of different batches while the
// aggregator writes.
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
	err := eachLast(ctx, js, n.Rollups, func(key string, value []byte) error {
		if !keep(key) {
			return nil
		}
		var c Rollup
		if err := c.UnmarshalJSON(value); err != nil { // not through json.Unmarshal, which checks the whole input first
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

// eachLast calls fn with the current value of every key of KV bucket
// bucket (none when it does not exist), deleted keys skipped, reading its
// stream once with an ordered consumer from the last message of each
// subject. It stops at the message that had nothing pending after it.
func eachLast(ctx context.Context, js jetstream.JetStream, bucket string, fn func(key string, value []byte) error) error {
	stream, err := js.Stream(ctx, "KV_"+bucket)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("projection: opening %s: %w", bucket, err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("projection: reading %s: %w", bucket, err)
	}
	if info.State.Msgs == 0 {
		return nil
	}
	prefix := "$KV." + bucket + "."
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{prefix + ">"}, DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy})
	if err != nil {
		return fmt.Errorf("projection: reading %s: %w", bucket, err)
	}
	it, err := cons.Messages(PullLimits(js.Conn().MaxPayload(), 8192))
	if err != nil {
		return fmt.Errorf("projection: reading %s: %w", bucket, err)
	}
	defer it.Stop()
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return fmt.Errorf("projection: reading %s: %w", bucket, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("projection: reading %s: a message without metadata: %w", bucket, err)
		}
		if op := m.Headers().Get(kvOperationHeader); op != "DEL" && op != "PURGE" {
			if err := fn(strings.TrimPrefix(m.Subject(), prefix), m.Data()); err != nil {
				return err
			}
		}
		if md.NumPending == 0 {
			return nil
		}
	}
}
