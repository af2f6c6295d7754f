package projection

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"errors"
	"fmt"
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
//
// A request is counted in one cell of each grain (Grain): its hour cell,
// the day cell holding that hour (the same provider, model and labels),
// and the model-hour cell holding it (the same hour, provider and model,
// whatever the labels). The coarser grains let a report read fewer
// records: a day cell sums up to 24 hour cells, a model-hour cell every
// label set of its hour.
type Cell struct {
	Grain Grain `json:"grain,omitempty"`
	// Hour is the cell's hour, UTC; for GrainDay, the day's first hour.
	Hour     time.Time `json:"hour"`
	Provider string    `json:"provider"`
	Model    string    `json:"model"`
	// Labels are the requests' labels; none in a GrainModelHour cell.
	Labels api.Labels `json:"labels,omitempty"`
}

// Grain is how finely a rollup cell cuts the requests.
type Grain uint8

const (
	// GrainHour cells are per hour, provider, model and labels: the
	// finest, and the only grain of a ledger whose rollups are not all
	// complete (LedgerRollupGrains).
	GrainHour Grain = iota
	// GrainDay cells are per UTC day, provider, model and labels.
	GrainDay
	// GrainModelHour cells are per hour, provider and model: every label
	// set together.
	GrainModelHour
	numGrains
)

// Grains are every grain, finest first.
var Grains = []Grain{GrainHour, GrainDay, GrainModelHour}

// grainNames are the grains' names in a record ("grain") and in keys'
// first token (keyPrefix).
var grainNames = [numGrains]string{GrainHour: "hour", GrainDay: "day", GrainModelHour: "model_hour"}

// keyPrefix starts the key of a cell of each grain but GrainHour's, whose
// key starts with its hour.
var keyPrefix = [numGrains]string{GrainDay: "d.", GrainModelHour: "m."}

func (g Grain) String() string {
	if g < numGrains {
		return grainNames[g]
	}
	return fmt.Sprintf("grain(%d)", uint8(g))
}

// MarshalText writes the grain's name.
func (g Grain) MarshalText() ([]byte, error) {
	if g >= numGrains {
		return nil, fmt.Errorf("projection: no grain %d", uint8(g))
	}
	return []byte(grainNames[g]), nil
}

// UnmarshalText reads a grain's name.
func (g *Grain) UnmarshalText(b []byte) error {
	for i, n := range grainNames {
		if string(b) == n {
			*g = Grain(i)
			return nil
		}
	}
	return fmt.Errorf("projection: grain %q is none of hour, day, model_hour", b)
}

// In returns the cell of grain g that holds the hour cell c: c itself
// for GrainHour; the day of its hour with its provider, model and labels
// for GrainDay; its hour, provider and model for GrainModelHour.
func (c Cell) In(g Grain) Cell {
	switch g {
	case GrainDay:
		h := c.Hour.UTC()
		return Cell{Grain: GrainDay, Hour: time.Date(h.Year(), h.Month(), h.Day(), 0, 0, 0, 0, time.UTC), Provider: c.Provider, Model: c.Model, Labels: c.Labels}
	case GrainModelHour:
		return Cell{Grain: GrainModelHour, Hour: c.Hour, Provider: c.Provider, Model: c.Model}
	}
	return c
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

// RollupFilter selects rollups of one grain by hour: Since inclusive,
// Until exclusive; a zero bound is open. A GrainDay cell is selected when
// its day starts in the range: a bound should then be a day's first hour.
type RollupFilter struct {
	Grain        Grain
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

// hourLayout starts a rollup's key: the cell's hour, UTC (dayLayout its
// day, for GrainDay).
const (
	hourLayout = "2006010215"
	dayLayout  = "20060102"
)

// timeLayout is the layout of the time token of a key of grain g.
func (g Grain) timeLayout() string {
	if g == GrainDay {
		return dayLayout
	}
	return hourLayout
}

// rollupKeyEncoding writes the hash of a rollup key: base32 without
// padding (A-Z, 2-7), which a KV key may hold.
var rollupKeyEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// Key returns the key of c's record in ledger_rollups. For GrainHour:
// <YYYYMMDDHH>.<base32 of the SHA-256 of provider, model and the labels
// sorted by key, each length-prefixed>; for GrainDay d.<YYYYMMDD>.<hash>;
// for GrainModelHour m.<YYYYMMDDHH>.<hash> (of provider and model: the
// cell has no labels). It is deterministic, holds only characters a KV
// key may, and its time token sorts by time (years 0 to 9999, all the
// contract allows), so a range of hours is a range of keys; the grains'
// keys have different numbers of tokens, so a subject filter reads one
// grain (grainSubjects).
func (c Cell) Key() string {
	sum := cellHash(c.Provider, c.Model, c.Labels)
	return c.keyWith(&sum)
}

// cellHash is the SHA-256 of a cell's key: of provider, model and the
// labels sorted by key, each preceded by its length as a varint.
func cellHash(provider, model string, labels api.Labels) [sha256.Size]byte {
	var keys [api.MaxLabels]string
	ks := keys[:0]
	for k := range labels {
		ks = append(ks, k) // beyond MaxLabels (never in a record): on the heap
	}
	slices.Sort(ks)
	var stack [512]byte
	b := stack[:0]
	field := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	field(provider)
	field(model)
	for _, k := range ks {
		field(k)
		field(labels[k])
	}
	return sha256.Sum256(b)
}

// keyWith returns c's key given the hash of its provider, model and
// labels (cellHash).
func (c Cell) keyWith(sum *[sha256.Size]byte) string {
	var stack [80]byte
	b := append(stack[:0], keyPrefix[c.Grain]...)
	b = appendTimeToken(b, c.Hour.UTC(), c.Grain)
	b = append(b, '.')
	return string(rollupKeyEncoding.AppendEncode(b, sum[:]))
}

// appendTimeToken appends t as YYYYMMDDHH (YYYYMMDD for GrainDay), as
// Time.AppendFormat with hourLayout or dayLayout would for the years a
// key holds (0 to 9999).
func appendTimeToken(b []byte, t time.Time, g Grain) []byte {
	y, m, d := t.Date()
	if y < 0 || y > 9999 {
		return t.AppendFormat(b, g.timeLayout())
	}
	b = append(b, byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10),
		byte('0'+int(m)/10), byte('0'+int(m)%10), byte('0'+d/10), byte('0'+d%10))
	if g != GrainDay {
		h := t.Hour()
		b = append(b, byte('0'+h/10), byte('0'+h%10))
	}
	return b
}

// CellKeys keeps the keys of the cells of every grain holding an hour
// cell, which the batch (and verify) need for every request it loads:
// many requests share a cell, so most find them here. A cell without labels is found by
// its hour, provider and model; one with labels also by the hash of its
// key (computed anyway: the hour and day cells' keys share it). At most
// maxCellKeys cells are kept, then it starts over. The zero value is
// ready; it is not safe for concurrent use.
type CellKeys struct {
	m map[cellKeysKey]*[numGrains]string
}

type cellKeysKey struct {
	hour            int64
	provider, model string
	labels          [sha256.Size]byte // zero for a cell without labels
}

const maxCellKeys = 4096

// Keys returns the keys of the cells of every grain holding the hour
// cell c, indexed by Grain: Cell.In(g).Key() for each g. The caller must
// not change them.
func (ck *CellKeys) Keys(c Cell) *[numGrains]string {
	k := cellKeysKey{hour: c.Hour.Unix(), provider: c.Provider, model: c.Model}
	var sum [sha256.Size]byte
	if len(c.Labels) > 0 {
		sum = cellHash(c.Provider, c.Model, c.Labels)
		k.labels = sum
	}
	if keys, ok := ck.m[k]; ok {
		return keys
	}
	if len(c.Labels) == 0 {
		sum = cellHash(c.Provider, c.Model, nil)
	}
	keys := new([numGrains]string)
	keys[GrainHour] = c.keyWith(&sum)
	keys[GrainDay] = c.In(GrainDay).keyWith(&sum)
	mh := sum // a cell without labels: its hash is the model-hour cell's
	if len(c.Labels) > 0 {
		mh = cellHash(c.Provider, c.Model, nil)
	}
	keys[GrainModelHour] = c.In(GrainModelHour).keyWith(&mh)
	if ck.m == nil || len(ck.m) >= maxCellKeys {
		ck.m = make(map[cellKeysKey]*[numGrains]string)
	}
	ck.m[k] = keys
	return keys
}

// ReadRollups returns the rollups of grain f.Grain of the ledger whose
// bucket names are n (Names.Rollups; ErrNoRollups when it is empty),
// those whose hour is in [f.Since, f.Until), in no particular order. A
// bucket not yet created holds none. It reads the bucket's stream once
// with an ordered consumer that starts at the last message of every key
// of the grain, so tens of thousands of cells come in a few large pulls.
// When both bounds are set and span at most maxTimeFilters hours (days
// for GrainDay), the consumer's subject filters name them and the server
// sends nothing else; otherwise the hour filter is applied to the key
// before a record is decoded. Each record is whole; records of different
// cells may be of different batches while the aggregator writes.
//
// The coarser grains hold every request only when LedgerRollupGrains says
// so.
func ReadRollups(ctx context.Context, js jetstream.JetStream, n Names, f RollupFilter) ([]Rollup, error) {
	var out []Rollup
	err := EachRollup(ctx, js, n, f, func(c *Rollup) error {
		out = append(out, *c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// EachRollup calls fn with every record ReadRollups returns for f, as it
// reads them, and stops at fn's first error: a caller that sums the cells
// (the report) holds none of them. fn must not keep c, which the next
// record reuses; it may keep c's strings and labels.
func EachRollup(ctx context.Context, js jetstream.JetStream, n Names, f RollupFilter, fn func(c *Rollup) error) error {
	if n.Rollups == "" {
		return ErrNoRollups
	}
	if f.Grain >= numGrains {
		return fmt.Errorf("projection: no grain %d", uint8(f.Grain))
	}
	since, until := timeBound(f.Since, f.Grain), timeBound(f.Until, f.Grain)
	prefix := keyPrefix[f.Grain]
	width := len(f.Grain.timeLayout())
	keep := func(key string) bool {
		if key == names.FenceKey || len(key) < len(prefix)+width+1 || !strings.HasPrefix(key, prefix) {
			return false
		}
		h := key[len(prefix) : len(prefix)+width]
		return (since == "" || h >= since) && (until == "" || h < until)
	}
	var c Rollup
	return eachLast(ctx, js, n.Rollups, grainSubjects(f), func(key string, value []byte) error {
		if !keep(key) {
			return nil
		}
		c = Rollup{}
		if err := c.UnmarshalJSON(value); err != nil { // not through json.Unmarshal, which checks the whole input first
			return fmt.Errorf("%w: stored rollup %q is not readable: %v", ErrInvariant, key, err)
		}
		return fn(&c)
	})
}

// timeBound is a bound of a RollupFilter as the time token of a key of
// grain g: a cell's hour H (day D) is in [Since, Until) exactly when its
// token is in [ceil(Since), ceil(Until)), ceil rounding up to the hour
// (day). "" for an open bound.
func timeBound(t time.Time, g Grain) string {
	if t.IsZero() {
		return ""
	}
	t = t.UTC()
	if g == GrainDay {
		d := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
		if d.Before(t) {
			d = d.AddDate(0, 0, 1)
		}
		return d.Format(dayLayout)
	}
	return t.Add(time.Hour - 1).Truncate(time.Hour).Format(hourLayout)
}

// maxTimeFilters is the most hours (days) a RollupFilter's range may span
// for ReadRollups to name each in a subject filter.
const maxTimeFilters = 512

// grainSubjects returns the key patterns (after the bucket's subject
// prefix) ReadRollups reads for f: one per hour (day) of a bounded range
// that spans at most maxTimeFilters, else every key of the grain (and, for
// GrainHour, the fence key, which has as many tokens).
func grainSubjects(f RollupFilter) []string {
	prefix := keyPrefix[f.Grain]
	all := []string{prefix + "*.*"}
	if f.Since.IsZero() || f.Until.IsZero() {
		return all
	}
	step, layout := time.Hour, hourLayout
	if f.Grain == GrainDay {
		step, layout = 24*time.Hour, dayLayout
	}
	since, _ := time.Parse(layout, timeBound(f.Since, f.Grain))
	until, _ := time.Parse(layout, timeBound(f.Until, f.Grain))
	if !since.Before(until) {
		return nil
	}
	if until.Sub(since)/step > maxTimeFilters {
		return all
	}
	var subs []string
	for t := since; t.Before(until); t = t.Add(step) {
		subs = append(subs, prefix+t.Format(layout)+".*")
	}
	return subs
}

// eachLast calls fn with the current value of every key of KV bucket
// bucket (none when it does not exist) that matches one of the patterns
// keys (none: nothing is read), deleted keys skipped, reading its stream
// once with an ordered consumer from the last message of each subject.
// It stops at the message that had nothing pending after it.
func eachLast(ctx context.Context, js jetstream.JetStream, bucket string, keys []string, fn func(key string, value []byte) error) error {
	if len(keys) == 0 {
		return nil
	}
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
	subjects := make([]string, len(keys))
	for i, k := range keys {
		subjects[i] = prefix + k
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: subjects, DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy})
	if err != nil {
		return fmt.Errorf("projection: reading %s: %w", bucket, err)
	}
	it, err := cons.Messages(PullLimits(js.Conn().MaxPayload(), 8192))
	if err != nil {
		return fmt.Errorf("projection: reading %s: %w", bucket, err)
	}
	defer it.Stop()
	// The filters may match no key: then no message comes. The consumer's
	// creation (Messages) answered how many messages it has to deliver;
	// its cached answer costs no request (and no permission for
	// $JS.API.CONSUMER.INFO, which the reader role does not have).
	if ci := cons.CachedInfo(); ci != nil && ci.NumPending == 0 {
		return nil
	}
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
