package pricebook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/pricing"
	"github.com/agentledger/ledger/internal/topology"
)

// ErrUnavailable means a catalog version cannot be priced with by this
// process: it is not stored, or it is stored in the old form (the user's
// file only) and this build's default catalog differs from the one it was
// made over.
var ErrUnavailable = errors.New("pricebook: catalog version unavailable")

// MaxStoredBytes bounds a stored catalog entry (the resolved catalog and
// the user's file), below the NATS server's default max payload (1 MiB).
const MaxStoredBytes = 960 << 10

// Keys of ledger_prices.
const (
	currentKey    = "current"
	catalogPrefix = "catalog."
)

// Entry is one stored catalog version.
type Entry struct {
	Version string `json:"version"`
	// Catalog is the resolved catalog (the default merged with File), in
	// the catalog file format pricing.Parse reads: any build prices with
	// it, whatever its own default. Entries stored before it was kept
	// (the old form) have none: they are rebuilt from File and this
	// build's default, which must give Version.
	Catalog json.RawMessage `json:"catalog,omitempty"`
	// Default is the version of the default catalog File was merged over.
	Default string `json:"default,omitempty"`
	// File is the user's file merged over the default catalog ("" for the
	// default catalog alone); Name the name it was loaded from.
	File     string    `json:"file"`
	Name     string    `json:"name,omitempty"`
	LoadedAt time.Time `json:"loaded_at"`
}

// DefaultName is the Name of a catalog a build stored because its
// default catalog (merged with the current user's file, if any) differs
// from the current one (Book.AdoptDefault).
const DefaultName = "(default catalog of a build)"

// current is the value of currentKey.
type current struct {
	Version  string    `json:"version"`
	Previous string    `json:"previous,omitempty"`
	LoadedAt time.Time `json:"loaded_at"`
}

// Book reads and writes the catalogs of ledger_prices. It is safe for
// concurrent use.
type Book struct {
	kv   jetstream.KeyValue // nil: no bucket yet (Lookup), only the default
	base *pricing.Catalog

	mu    sync.Mutex
	cache map[string]*pricing.Catalog
}

// Open ensures bucket ledger_prices and returns its Book. base is this
// build's default catalog (nil: pricing.Default()).
func Open(ctx context.Context, js jetstream.JetStream, tc topology.Config, base *pricing.Catalog) (*Book, error) {
	kv, err := topology.EnsureBucket(ctx, js, tc, names.PricesBucket, "Usage ledger: price catalogs by version and the current one.")
	if err != nil {
		return nil, err
	}
	return newBook(kv, base), nil
}

// Lookup returns the Book of ledger_prices without creating the bucket:
// with no bucket, the current catalog is the default one.
func Lookup(ctx context.Context, js jetstream.JetStream, base *pricing.Catalog) (*Book, error) {
	kv, err := js.KeyValue(ctx, names.PricesBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return newBook(nil, base), nil
	}
	if err != nil {
		return nil, fmt.Errorf("pricebook: opening %s: %w", names.PricesBucket, err)
	}
	return newBook(kv, base), nil
}

func newBook(kv jetstream.KeyValue, base *pricing.Catalog) *Book {
	if base == nil {
		base = pricing.Default()
	}
	return &Book{kv: kv, base: base, cache: map[string]*pricing.Catalog{base.Version(): base}}
}

// Default is this build's default catalog.
func (b *Book) Default() *pricing.Catalog { return b.base }

// key is the stored key of a version: versions are digests of any
// spelling, keys are restricted.
func key(version string) string {
	h := sha256.Sum256([]byte(version))
	return catalogPrefix + hex.EncodeToString(h[:16])
}

// Build returns the catalog of a user's file (empty: the default alone)
// merged over this build's default.
func (b *Book) Build(file []byte) (*pricing.Catalog, error) {
	if len(file) == 0 {
		return b.base, nil
	}
	user, err := pricing.Parse(file)
	if err != nil {
		return nil, err
	}
	return b.base.Merge(user), nil
}

// Load stores the catalog of file (merged over the default) under its
// version, makes it the current catalog and returns it. Loading the same
// prices again changes nothing but the current key.
func (b *Book) Load(ctx context.Context, file []byte, name string, now time.Time) (*pricing.Catalog, error) {
	if b.kv == nil {
		return nil, fmt.Errorf("pricebook: %s is not open for writing", names.PricesBucket)
	}
	cat, err := b.Build(file)
	if err != nil {
		return nil, err
	}
	if err := b.store(ctx, cat, file, name, now); err != nil {
		return nil, err
	}
	prev, err := b.Current(ctx)
	if err != nil {
		return nil, err
	}
	if err := b.makeCurrent(ctx, cat.Version(), prev, now); err != nil {
		return nil, err
	}
	return cat, nil
}

// store keeps cat, made of file over this build's default, under its
// version: the resolved catalog, so that any build can price with it.
// Written once, never edited: a version already stored is left as it is
// (an old-form entry stays in the old form; Catalog reads both).
func (b *Book) store(ctx context.Context, cat *pricing.Catalog, file []byte, name string, now time.Time) error {
	v := cat.Version()
	resolved, err := json.Marshal(cat)
	if err != nil {
		return fmt.Errorf("pricebook: encoding catalog %s: %w", v, err)
	}
	data := mustJSON(Entry{Version: v, Catalog: resolved, Default: b.base.Version(), File: string(file), Name: name, LoadedAt: now.UTC()})
	if len(data) > MaxStoredBytes {
		return fmt.Errorf("pricebook: catalog %s is too large to store: %d bytes resolved with its file, at most %d", v, len(data), MaxStoredBytes)
	}
	if _, err := b.kv.Create(ctx, key(v), data); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("pricebook: storing catalog %s: %w", v, err)
	}
	b.remember(v, cat)
	return nil
}

func (b *Book) makeCurrent(ctx context.Context, v, prev string, now time.Time) error {
	if _, err := b.kv.Put(ctx, currentKey, mustJSON(current{Version: v, Previous: prev, LoadedAt: now.UTC()})); err != nil {
		return fmt.Errorf("pricebook: making %s current: %w", v, err)
	}
	return nil
}

// AdoptDefault treats this build's default catalog as a catalog change,
// as `aggregator prices load` of the current user's file would: it
// merges the user's file of the current catalog (none: the default
// alone) over this build's default and, when that gives another version
// than the current one (or no catalog was made current yet), stores it
// and makes it current. It returns the current version after it and
// whether it changed it. A writer calls it when a lease term begins, so
// that a build whose default adds prices prices with them (when they are
// forward-only against the ledger) and one whose default corrects a past
// price shows it in verify.
func (b *Book) AdoptDefault(ctx context.Context, now time.Time) (string, bool, error) {
	cur, cat, file, err := b.pending(ctx)
	if err != nil || cat == nil {
		return cur, false, err
	}
	name := DefaultName
	if len(file) > 0 {
		name = fmt.Sprintf("%s with the file of %s", DefaultName, cur)
	}
	if err := b.store(ctx, cat, file, name, now); err != nil {
		return "", false, err
	}
	if err := b.makeCurrent(ctx, cat.Version(), cur, now); err != nil {
		return "", false, err
	}
	return cat.Version(), true, nil
}

// Pending returns the version AdoptDefault would make current (this
// build's default merged with the current user's file), or "" when it
// would change nothing.
func (b *Book) Pending(ctx context.Context) (string, error) {
	_, cat, _, err := b.pending(ctx)
	if err != nil || cat == nil {
		return "", err
	}
	return cat.Version(), nil
}

// pending returns the current version and, when this build's default
// merged with its user's file gives another one, that catalog and the
// file.
func (b *Book) pending(ctx context.Context) (string, *pricing.Catalog, []byte, error) {
	if b.kv == nil {
		return b.base.Version(), nil, nil, nil
	}
	cur, file, err := b.currentFile(ctx)
	if err != nil {
		return "", nil, nil, err
	}
	cat, err := b.Build(file)
	if err != nil {
		return "", nil, nil, fmt.Errorf("pricebook: the current catalog %s's file over this build's default: %w", cur, err)
	}
	if cat.Version() == cur {
		return cur, nil, nil, nil
	}
	return cur, cat, file, nil
}

// currentFile returns the current version as key "current" records it
// ("": none yet) and the user's file it was made of.
func (b *Book) currentFile(ctx context.Context) (string, []byte, error) {
	e, err := b.kv.Get(ctx, currentKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("pricebook: reading the current catalog: %w", err)
	}
	var c current
	if err := json.Unmarshal(e.Value(), &c); err != nil || c.Version == "" {
		return "", nil, fmt.Errorf("pricebook: the current catalog %q is not readable", e.Value())
	}
	entry, err := b.entry(ctx, c.Version)
	if err != nil {
		return "", nil, err
	}
	return c.Version, []byte(entry.File), nil
}

// Current returns the version of the current catalog: the one loaded
// last, else the default catalog's.
func (b *Book) Current(ctx context.Context) (string, error) {
	if b.kv == nil {
		return b.base.Version(), nil
	}
	e, err := b.kv.Get(ctx, currentKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return b.base.Version(), nil
	}
	if err != nil {
		return "", fmt.Errorf("pricebook: reading the current catalog: %w", err)
	}
	var c current
	if err := json.Unmarshal(e.Value(), &c); err != nil || c.Version == "" {
		return "", fmt.Errorf("pricebook: the current catalog %q is not readable", e.Value())
	}
	return c.Version, nil
}

// Catalog returns the catalog of version: its stored resolved catalog,
// or for an entry stored in the old form (the user's file only) the file
// merged over this build's default, checked against the version;
// ErrUnavailable when it cannot be.
func (b *Book) Catalog(ctx context.Context, version string) (*pricing.Catalog, error) {
	b.mu.Lock()
	c, ok := b.cache[version]
	b.mu.Unlock()
	if ok {
		return c, nil
	}
	if b.kv == nil {
		return nil, fmt.Errorf("%w: %s is not stored (no %s bucket) and this build's default catalog is %s",
			ErrUnavailable, version, names.PricesBucket, b.base.Version())
	}
	e, err := b.entry(ctx, version)
	if err != nil {
		// A ledger priced by an earlier build's default alone, which
		// such builds never stored.
		for _, past := range pricing.PastDefaults() {
			if past.Version() == version {
				b.remember(version, past)
				return past, nil
			}
		}
		return nil, err
	}
	if len(e.Catalog) > 0 {
		if c, err = pricing.Parse(e.Catalog); err != nil {
			return nil, fmt.Errorf("pricebook: the stored catalog %s: %w", version, err)
		}
		if got := c.Version(); got != version {
			return nil, fmt.Errorf("%w: the stored catalog %s gives version %s here (this build digests prices otherwise)", ErrUnavailable, version, got)
		}
		b.remember(version, c)
		return c, nil
	}
	if c, err = b.Build([]byte(e.File)); err != nil {
		return nil, fmt.Errorf("pricebook: catalog %s: %w", version, err)
	}
	if got := c.Version(); got != version {
		// Made over an earlier build's default, before resolved
		// catalogs were stored.
		if past := overPastDefault(e.File, version); past != nil {
			b.remember(version, past)
			return past, nil
		}
		return nil, fmt.Errorf("%w: catalog %s is stored in the old form (the user's file only, before resolved catalogs were stored) and was made over another default catalog than this build's (here it gives %s): run a build with that default catalog, or `aggregator rebuild` to re-price the history with the current catalog",
			ErrUnavailable, version, got)
	}
	b.remember(version, c)
	return c, nil
}

// overPastDefault returns the catalog of file merged over the earlier
// build's default (pricing.PastDefaults) that gives version, or nil.
func overPastDefault(file, version string) *pricing.Catalog {
	var user *pricing.Catalog
	if file != "" {
		var err error
		if user, err = pricing.Parse([]byte(file)); err != nil {
			return nil
		}
	}
	for _, past := range pricing.PastDefaults() {
		c := past
		if user != nil {
			c = past.Merge(user)
		}
		if c.Version() == version {
			return c
		}
	}
	return nil
}

// entry reads the stored entry of version.
func (b *Book) entry(ctx context.Context, version string) (Entry, error) {
	var e Entry
	kve, err := b.kv.Get(ctx, key(version))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return e, fmt.Errorf("%w: %s is not stored in %s (a ledger priced by a build that did not store its default catalog), and this build's default catalog is %s: run a build with that default catalog, or `aggregator rebuild` to re-price the history with the current catalog",
			ErrUnavailable, version, names.PricesBucket, b.base.Version())
	}
	if err != nil {
		return e, fmt.Errorf("pricebook: reading catalog %s: %w", version, err)
	}
	if err := json.Unmarshal(kve.Value(), &e); err != nil {
		return e, fmt.Errorf("pricebook: catalog %s is not readable: %w", version, err)
	}
	return e, nil
}

func (b *Book) remember(v string, c *pricing.Catalog) {
	b.mu.Lock()
	b.cache[v] = c
	b.mu.Unlock()
}

// List returns the stored catalogs, oldest first, and the current version.
func (b *Book) List(ctx context.Context) ([]Entry, string, error) {
	cur, err := b.Current(ctx)
	if err != nil || b.kv == nil {
		return nil, cur, err
	}
	lister, err := b.kv.ListKeys(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("pricebook: listing %s: %w", names.PricesBucket, err)
	}
	var out []Entry
	for k := range lister.Keys() {
		if len(k) <= len(catalogPrefix) || k[:len(catalogPrefix)] != catalogPrefix {
			continue
		}
		kve, err := b.kv.Get(ctx, k)
		if err != nil {
			return nil, "", fmt.Errorf("pricebook: reading %s: %w", k, err)
		}
		var e Entry
		if err := json.Unmarshal(kve.Value(), &e); err != nil {
			return nil, "", fmt.Errorf("pricebook: %s is not readable: %w", k, err)
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LoadedAt.Before(out[j].LoadedAt) })
	return out, cur, nil
}

func mustJSON(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("pricebook: encoding %T: %v", v, err))
	}
	return data
}

// Watch follows the current catalog for a running writer (see
// Book.WatchCurrent). A nil Watch sees nothing.
type Watch struct{ w jetstream.KeyWatcher }

// WatchCurrent watches key "current": Changed then says which version
// was made current since. The watch ends with ctx or Stop; its owner
// stops it.
func (b *Book) WatchCurrent(ctx context.Context) (*Watch, error) {
	if b.kv == nil {
		return nil, nil
	}
	w, err := b.kv.Watch(ctx, currentKey)
	if err != nil {
		return nil, fmt.Errorf("pricebook: watching the current catalog of %s: %w", names.PricesBucket, err)
	}
	return &Watch{w: w}, nil
}

// Changed returns the version made current last among the changes that
// arrived since the previous call (the first: the current one when the
// watch began), and false when none arrived. It never waits.
func (w *Watch) Changed() (version string, ok bool) {
	if w == nil {
		return "", false
	}
	for {
		select {
		case e, open := <-w.w.Updates():
			if !open {
				return version, ok
			}
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue // the end of the initial values, or a delete
			}
			var c current
			if json.Unmarshal(e.Value(), &c) == nil && c.Version != "" {
				version, ok = c.Version, true
			}
		default:
			return version, ok
		}
	}
}

// Stop ends the watch.
func (w *Watch) Stop() {
	if w != nil {
		_ = w.w.Stop()
	}
}
