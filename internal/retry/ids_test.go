package retry

import (
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestULIDSource(t *testing.T) {
	s := newULIDSource()
	at := time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC)
	tests := []struct {
		name     string
		t        time.Time
		stamped  bool // the ULID carries t
		fallback bool
	}{
		{"ordinary time", at, true, false},
		{"epoch", time.Unix(0, 0), true, false},
		{"before 1970 falls back", time.Date(1969, 1, 1, 0, 0, 0, 0, time.UTC), false, true},
		{"beyond ULID time falls back", time.Date(10900, 1, 1, 0, 0, 0, 0, time.UTC), false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := s.make(tt.t)
			assert.True(t, canonicalULID(id), id)
			parsed := ulid.MustParseStrict(id)
			if tt.stamped {
				assert.Equal(t, ulid.Timestamp(tt.t), parsed.Time())
			}
			if tt.fallback {
				assert.InDelta(t, float64(ulid.Now()), float64(parsed.Time()), float64(time.Minute.Milliseconds()))
			}
		})
	}
}

func TestULIDSourceMonotonic(t *testing.T) {
	s := newULIDSource()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	prev := s.make(at)
	for range 1000 {
		id := s.make(at) // same millisecond: strictly increasing
		require.Greater(t, id, prev)
		prev = id
	}
	a, b := s.makePair(at)
	assert.Greater(t, a, prev)
	assert.Greater(t, b, a)
	assert.True(t, canonicalULID(a) && canonicalULID(b))
}

func TestCanonicalULID(t *testing.T) {
	good := ulid.MustNew(1, nil).String()
	tests := []struct {
		id   string
		want bool
	}{
		{good, true},
		{"01JH8Y5W9Q2V3X4Z5A6B7C8D9E", true},
		{"01jh8y5w9q2v3x4z5a6b7c8d9e", false}, // lower case
		{"01JH8Y5W9Q2V3X4Z5A6B7C8D9", false},  // short
		{"81JH8Y5W9Q2V3X4Z5A6B7C8D9E", false}, // overflows 128 bits
		{"01JH8Y5W9Q2V3X4Z5A6B7C8D9U", false}, // U is not Crockford
		{"", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, canonicalULID(tt.id), tt.id)
	}
}
