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
	bucket := jetstream.StreamConfig{Name: "KV_ledger_requests", Replicas: 1, Duplicates: 2 * time.Minute,
		MaxMsgsPerSubject: 1, Storage: jetstream.FileStorage, MaxMsgSize: -1}
	withBucket := func(f func(*jetstream.StreamConfig)) jetstream.StreamConfig {
		c := bucket
		f(&c)
		return c
	}
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
		{"a bucket compares replicas and the ledger's rules", Config{Replicas: 3, DuplicateWindow: time.Hour},
			bucket, []Difference{{
				Resource: "ledger_requests", Setting: "replicas", Want: "3", Have: "1",
				Fix: "nats stream edit KV_ledger_requests --replicas 3",
			}}},
		{"a bucket as EnsureBucket makes it", Config{}, bucket, nil},
		{"a bucket with a TTL breaks the rules", Config{}, withBucket(func(c *jetstream.StreamConfig) { c.MaxAge = time.Hour }), []Difference{{
			Resource: "ledger_requests", Setting: "TTL", Want: "none", Have: "1h0m0s", Breaks: true,
			Fix: "nats stream edit KV_ledger_requests --max-age 0",
			Why: "records would expire, and the next event of an expired request would count it again",
		}}},
		{"a bucket keeping history breaks the rules", Config{}, withBucket(func(c *jetstream.StreamConfig) { c.MaxMsgsPerSubject = 5 }), []Difference{{
			Resource: "ledger_requests", Setting: "history", Want: "1", Have: "5", Breaks: true,
			Fix: "nats stream edit KV_ledger_requests --max-msgs-per-subject 1",
			Why: "readers take every message of the bucket for a key's current value",
		}}},
		{"memory storage and a small max value size warn", Config{}, withBucket(func(c *jetstream.StreamConfig) {
			c.Storage, c.MaxMsgSize = jetstream.MemoryStorage, 1024
		}), []Difference{
			{Resource: "ledger_requests", Setting: "storage", Want: "file", Have: "Memory",
				Fix: "recreate it: `nats kv del ledger_requests`, then start the aggregator and run `aggregator rebuild`",
				Why: "a memory bucket loses its records when the server restarts"},
			{Resource: "ledger_requests", Setting: "max value size", Want: "unlimited", Have: "1024",
				Fix: "nats stream edit KV_ledger_requests --max-msg-size -1",
				Why: "below 724992 bytes, the largest record the ledger writes: the aggregator stalls on such a record"},
		}},
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

// Issue 15, case 6: a ledger_requests created with a TTL (nats kv add
// --ttl) used to be kept as it was, and expired records were counted
// again. EnsureBucket refuses a bucket whose TTL or history breaks the
// ledger's rules, with the command that fixes it; once fixed, it is
// accepted.
func TestEnsureBucketRefusesBrokenSettings(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		cfg  jetstream.KeyValueConfig
		fix  string
	}{
		{"TTL", jetstream.KeyValueConfig{Bucket: names.RequestsBucket, TTL: time.Hour}, "nats stream edit KV_ledger_requests --max-age 0"},
		{"history", jetstream.KeyValueConfig{Bucket: names.SessionsBucket, History: 5}, "nats stream edit KV_ledger_sessions --max-msgs-per-subject 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, js := natstest.StartJS(t)
			_, err := js.CreateKeyValue(ctx, tc.cfg)
			require.NoError(t, err)
			_, err = EnsureBucket(ctx, js, Config{}, tc.cfg.Bucket, "records")
			require.ErrorIs(t, err, ErrBucketSettings)
			require.Contains(t, err.Error(), tc.fix)
			require.Contains(t, err.Error(), "refusing to start")

			// The fix the error names, done through the API.
			s, err := js.Stream(ctx, "KV_"+tc.cfg.Bucket)
			require.NoError(t, err)
			cfg := s.CachedInfo().Config
			cfg.MaxAge, cfg.MaxMsgsPerSubject = 0, 1
			_, err = js.UpdateStream(ctx, cfg)
			require.NoError(t, err)
			_, err = EnsureBucket(ctx, js, Config{}, tc.cfg.Bucket, "records")
			require.NoError(t, err)
		})
	}
}
