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
// run` start from, and the shipped deployment example with the NATS
// roles set sync_interval: always.
func TestRepoConfigIsDurable(t *testing.T) {
	for _, role := range []string{"PUBLISHER", "AGENT", "GATEWAY", "AGGREGATOR", "READER", "OPERATOR"} {
		t.Setenv("LEDGER_"+role+"_PASSWORD", "test")
	}
	for _, file := range []string{"nats.conf", filepath.Join("examples", "nats", "roles.conf")} {
		opts, err := server.ProcessConfigFile(filepath.Join("..", "..", file))
		require.NoError(t, err, file)
		require.True(t, opts.SyncAlways, "%s must set sync_interval: always", file)
	}
}
