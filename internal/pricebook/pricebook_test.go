package pricebook

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/pricing"
	"github.com/agentledger/ledger/internal/topology"
)

var loadedAt = time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)

// builds returns two builds' default catalogs: a, and b that adds a
// model to it.
func builds(t *testing.T) (a, b *pricing.Catalog) {
	t.Helper()
	m := `"provider": "openai", "model": "m", "effective_from": "2025-01-01", "input": "1", "output": "2"`
	n := `"provider": "openai", "model": "n", "effective_from": "2027-01-01", "input": "3", "output": "4"`
	return catalog(t, m), catalog(t, m, n)
}

func userFile(input string) []byte {
	return []byte(`{"entries": [{"provider": "openai", "model": "u", "effective_from": "2025-01-01",
 "input": "` + input + `", "output": "1", "source": "test", "read_on": "2026-12-04"}]}`)
}

func openBook(t *testing.T, js jetstream.JetStream, base *pricing.Catalog) *Book {
	t.Helper()
	b, err := Open(context.Background(), js, topology.Config{}, base)
	require.NoError(t, err)
	return b
}

// A version is stored resolved, so a build with another default catalog
// prices with it (before, only the user's file was stored, and such a
// build could not rebuild the version: ErrUnavailable). An entry stored
// in the old form (the file only) is still read by a build whose default
// gives its version, and refused, saying why, by another; a version never
// stored is unavailable.
func TestCatalogStoredResolved(t *testing.T) {
	ctx := context.Background()
	_, _, js := natstest.StartJS(t)
	a, b := builds(t)
	bookA := openBook(t, js, a)
	loaded, err := bookA.Load(ctx, userFile("5"), "user.json", loadedAt)
	require.NoError(t, err)

	bookB := openBook(t, js, b)
	got, err := bookB.Catalog(ctx, loaded.Version())
	require.NoError(t, err, "a build with another default reads the resolved catalog")
	require.Equal(t, loaded.Version(), got.Version())
	require.Equal(t, loaded.Entries(), got.Entries())

	// The old form, as stored before: the user's file only.
	user, err := pricing.Parse(userFile("6"))
	require.NoError(t, err)
	old := a.Merge(user)
	kv, err := js.KeyValue(ctx, "ledger_prices")
	require.NoError(t, err)
	_, err = kv.Create(ctx, key(old.Version()), mustJSON(Entry{Version: old.Version(), File: string(userFile("6")), LoadedAt: loadedAt}))
	require.NoError(t, err)
	got, err = openBook(t, js, a).Catalog(ctx, old.Version())
	require.NoError(t, err, "the build whose default made it rebuilds it")
	require.Equal(t, old.Version(), got.Version())
	_, err = bookB.Catalog(ctx, old.Version())
	require.ErrorIs(t, err, ErrUnavailable)
	require.ErrorContains(t, err, "old form")

	_, err = bookB.Catalog(ctx, a.Version())
	require.ErrorIs(t, err, ErrUnavailable, "a default never stored")
	require.ErrorContains(t, err, "not stored")
}

// A build's default catalog is a catalog change: merged with the current
// user's file, stored and made current when it gives another version,
// once; with no catalog current yet, the default alone is stored, so
// that another build can price with it.
func TestAdoptDefault(t *testing.T) {
	ctx := context.Background()
	a, b := builds(t)
	user, err := pricing.Parse(userFile("5"))
	require.NoError(t, err)
	for _, withFile := range []bool{false, true} {
		_, _, js := natstest.StartJS(t)
		bookA := openBook(t, js, a)
		want := a
		if withFile {
			_, err := bookA.Load(ctx, userFile("5"), "user.json", loadedAt)
			require.NoError(t, err)
			want = a.Merge(user)
		}
		v, changed, err := bookA.AdoptDefault(ctx, loadedAt)
		require.NoError(t, err)
		require.Equal(t, want.Version(), v)
		require.Equal(t, !withFile, changed, "with a file, A's default over it is already current")

		bookB := openBook(t, js, b)
		pending, err := bookB.Pending(ctx)
		require.NoError(t, err)
		wantB := b
		if withFile {
			wantB = b.Merge(user)
		}
		require.Equal(t, wantB.Version(), pending)
		v, changed, err = bookB.AdoptDefault(ctx, loadedAt.Add(time.Hour))
		require.NoError(t, err)
		require.True(t, changed)
		require.Equal(t, wantB.Version(), v)
		cur, err := bookA.Current(ctx)
		require.NoError(t, err)
		require.Equal(t, wantB.Version(), cur, "made current")
		got, err := openBook(t, js, a).Catalog(ctx, wantB.Version())
		require.NoError(t, err, "build A prices with B's default")
		require.Equal(t, wantB.Entries(), got.Entries())
		got, err = openBook(t, js, b).Catalog(ctx, want.Version())
		require.NoError(t, err, "build B prices with what A recorded")
		require.Equal(t, want.Version(), got.Version())

		_, changed, err = bookB.AdoptDefault(ctx, loadedAt.Add(2*time.Hour))
		require.NoError(t, err)
		require.False(t, changed, "once")
		entries, _, err := bookB.List(ctx)
		require.NoError(t, err)
		last := entries[len(entries)-1]
		require.Equal(t, wantB.Version(), last.Version)
		require.Contains(t, last.Name, DefaultName)
		require.Equal(t, b.Version(), last.Default)
		require.NotEmpty(t, last.Catalog, "stored resolved")
	}
}

// A ledger priced by a build from before resolved catalogs were stored
// (main up to 26b7676) is readable by this build, whose default differs:
// the version of that build's default alone (never stored), and a file it
// stored in the old form over that default. The versions are those the
// old builds printed for pricing.Default().Version().
func TestPastDefaultsReadable(t *testing.T) {
	ctx := context.Background()
	pastVersions := []string{
		"204e3ee2006c08111869a927530b5f293650f7c8d2adf2972ac9e8c00ee57935", // e502eff
		"3b26d8d273b5f818ec04411e1790a7922c24da0a8cf7a8832a1216d9ef57c951", // 5ca1acb
		"6e9c032b766d0e3cddf39a5d046814cd95e0f70b2a720de1b68fca70ecf9e4cf", // 30a9fb7, main's default until this build
	}
	_, _, js := natstest.StartJS(t)
	book := openBook(t, js, pricing.Default())
	for _, v := range pastVersions {
		require.NotEqual(t, pricing.Default().Version(), v)
		got, err := book.Catalog(ctx, v)
		require.NoError(t, err, "the default alone of an old build, never stored")
		require.Equal(t, v, got.Version())
	}

	// The old form over main's last default: the user's file only.
	past := pricing.PastDefaults()
	last := past[len(past)-1]
	for _, p := range past {
		if p.Version() == pastVersions[2] {
			last = p
		}
	}
	require.Equal(t, pastVersions[2], last.Version())
	user, err := pricing.Parse(userFile("6"))
	require.NoError(t, err)
	old := last.Merge(user)
	kv, err := js.KeyValue(ctx, "ledger_prices")
	require.NoError(t, err)
	_, err = kv.Create(ctx, key(old.Version()), mustJSON(Entry{Version: old.Version(), File: string(userFile("6")), LoadedAt: loadedAt}))
	require.NoError(t, err)
	got, err := openBook(t, js, pricing.Default()).Catalog(ctx, old.Version())
	require.NoError(t, err, "a file stored in the old form over an old build's default")
	require.Equal(t, old.Version(), got.Version())
}
