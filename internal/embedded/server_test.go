package embedded

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/require"
)

// Issue 15, case 7: the embedded server and nats.conf used nats-server's
// default, an fsync every 2 minutes, so a power cut could lose
// acknowledged writes (and keep a checkpoint whose records were lost).
// The embedded server syncs every write unless its configuration says
// otherwise, and nats.conf says so explicitly.
func TestDurableByDefault(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sync     string // the jetstream block's sync_interval line, if any
		always   bool
		interval time.Duration
	}{
		{"not set: always", "", true, 0},
		{"always", "sync_interval: always", true, 0},
		{"an interval the operator chose", "sync_interval: 30s", false, 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			conf := filepath.Join(dir, "nats.conf")
			body := "host: 127.0.0.1\nport: -1\njetstream {\n  store_dir: \"" + filepath.Join(dir, "js") + "\"\n  " + tc.sync + "\n}\n"
			require.NoError(t, os.WriteFile(conf, []byte(body), 0o600))
			s, err := FromConfig(conf, "", false)
			require.NoError(t, err)
			defer s.Shutdown()
			jsc := s.Server().JetStreamConfig()
			require.NotNil(t, jsc)
			require.Equal(t, tc.always, jsc.SyncAlways)
			if tc.interval != 0 {
				require.Equal(t, tc.interval, jsc.SyncInterval)
			}
		})
	}
}

// The repository's nats.conf, which `make run` and a bare `aggregator
// run` start from, sets sync_interval: always.
func TestRepoConfigIsDurable(t *testing.T) {
	opts, err := server.ProcessConfigFile(filepath.Join("..", "..", "nats.conf"))
	require.NoError(t, err)
	require.True(t, opts.SyncAlways, "nats.conf must set sync_interval: always")
}
