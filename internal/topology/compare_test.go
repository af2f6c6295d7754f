package topology

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/natstest"
)

func TestCompare(t *testing.T) {
	attempts := jetstream.StreamConfig{Name: names.AttemptsStream, Replicas: 1, Duplicates: 2 * time.Minute}
	tests := []struct {
		name string
		want Config
		have jetstream.StreamConfig
		diff []Difference
	}{
		{"zero config has no opinion", Config{}, attempts, nil},
		{"same settings", Config{Replicas: 1, DuplicateWindow: 2 * time.Minute}, attempts, nil},
		{"replicas", Config{Replicas: 3}, attempts, []Difference{{
			Resource: names.AttemptsStream, Setting: "replicas", Want: "3", Have: "1",
			Fix: "nats stream edit LEDGER_ATTEMPTS --replicas 3",
		}}},
		{"zero replicas stored count as one", Config{Replicas: 1}, jetstream.StreamConfig{Name: names.AttemptsStream}, nil},
		{"duplicate window and max age", Config{DuplicateWindow: 10 * time.Minute, MaxAge: 720 * time.Hour}, attempts, []Difference{
			{Resource: names.AttemptsStream, Setting: "duplicate window", Want: "10m0s", Have: "2m0s", Fix: "nats stream edit LEDGER_ATTEMPTS --dupe-window 10m0s"},
			{Resource: names.AttemptsStream, Setting: "max age", Want: "720h0m0s", Have: "unlimited", Fix: "nats stream edit LEDGER_ATTEMPTS --max-age 720h0m0s"},
		}},
		{"max age is the attempt stream's only", Config{MaxAge: time.Hour},
			jetstream.StreamConfig{Name: names.RejectedStream, Replicas: 1, Duplicates: 2 * time.Minute}, nil},
		{"a bucket compares replicas only", Config{Replicas: 3, DuplicateWindow: time.Hour},
			jetstream.StreamConfig{Name: "KV_ledger_requests", Replicas: 1, Duplicates: 2 * time.Minute}, []Difference{{
				Resource: "ledger_requests", Setting: "replicas", Want: "3", Have: "1",
				Fix: "nats stream edit KV_ledger_requests --replicas 3",
			}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.diff, Compare(tt.want, tt.have))
		})
	}
	d := Compare(Config{Replicas: 3}, attempts)[0]
	assert.Equal(t, "LEDGER_ATTEMPTS has replicas 1, not the 3 asked for; JetStream keeps 1 (to change it: nats stream edit LEDGER_ATTEMPTS --replicas 3)", d.String())
}

// The story: a publisher that starts first creates LEDGER_ATTEMPTS
// with one replica; a later aggregator asking for three is told.
func TestCheckExistingResources(t *testing.T) {
	_, _, js := natstest.StartJS(t)
	ctx := context.Background()
	diffs, err := Check(ctx, js, Config{Replicas: 3}, names.RequestsBucket)
	require.NoError(t, err)
	assert.Empty(t, diffs, "nothing exists yet")

	_, err = EnsureAttempts(ctx, js, Config{})
	require.NoError(t, err)
	_, err = EnsureBucket(ctx, js, Config{}, names.RequestsBucket, "requests")
	require.NoError(t, err)
	diffs, err = Check(ctx, js, Config{Replicas: 3}, names.RequestsBucket)
	require.NoError(t, err)
	require.Len(t, diffs, 2)
	assert.Equal(t, names.AttemptsStream, diffs[0].Resource)
	assert.Equal(t, names.RequestsBucket, diffs[1].Resource)
	diffs, err = Check(ctx, js, Config{})
	require.NoError(t, err)
	assert.Empty(t, diffs)
}
