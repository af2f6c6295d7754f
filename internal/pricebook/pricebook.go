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
// process: it is not stored, or this build's default catalog differs from
// the one it was made with.
var ErrUnavailable = errors.New("pricebook: catalog version unavailable")

// Keys of ledger_prices.
const (
	currentKey    = "current"
	catalogPrefix = "catalog."
)

// Entry is one stored catalog version.
type Entry struct {
	Version string `json:"version"`
	// File is the user's file merged over the default catalog ("" for the
	// default catalog alone); Name the name it was loaded from.
	File     string    `json:"file"`
	Name     string    `json:"name,omitempty"`
	LoadedAt time.Time `json:"loaded_at"`
}

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
	v := cat.Version()
	e := Entry{Version: v, File: string(file), Name: name, LoadedAt: now.UTC()}
	if _, err := b.kv.Create(ctx, key(v), mustJSON(e)); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return nil, fmt.Errorf("pricebook: storing catalog %s: %w", v, err)
	}
	prev, err := b.Current(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := b.kv.Put(ctx, currentKey, mustJSON(current{Version: v, Previous: prev, LoadedAt: now.UTC()})); err != nil {
		return nil, fmt.Errorf("pricebook: making %s current: %w", v, err)
	}
	b.remember(v, cat)
	return cat, nil
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

// Catalog returns the catalog of version, rebuilt from its stored file
// and this build's default and checked against the version; ErrUnavailable
// when it cannot be.
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
	kve, err := b.kv.Get(ctx, key(version))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w: %s is not stored in %s, and this build's default catalog is %s: run a build with that default catalog, or `aggregator prices load` the file and `aggregator rebuild`",
			ErrUnavailable, version, names.PricesBucket, b.base.Version())
	}
	if err != nil {
		return nil, fmt.Errorf("pricebook: reading catalog %s: %w", version, err)
	}
	var e Entry
	if err := json.Unmarshal(kve.Value(), &e); err != nil {
		return nil, fmt.Errorf("pricebook: catalog %s is not readable: %w", version, err)
	}
	if c, err = b.Build([]byte(e.File)); err != nil {
		return nil, fmt.Errorf("pricebook: catalog %s: %w", version, err)
	}
	if got := c.Version(); got != version {
		return nil, fmt.Errorf("%w: catalog %s was made over another default catalog than this build's (here it gives %s): run a build with that default catalog, or `aggregator prices load` the file and `aggregator rebuild`",
			ErrUnavailable, version, got)
	}
	b.remember(version, c)
	return c, nil
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
