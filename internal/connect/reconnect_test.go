package connect

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/embedded"
	"github.com/agentledger/ledger/internal/testkit"
)

func TestReconnectDelay(t *testing.T) {
	tests := []struct {
		n    int
		r    float64
		want time.Duration
	}{
		{1, 0.5, ReconnectBase},
		{0, 0.5, ReconnectBase},
		{2, 0.5, 2 * ReconnectBase},
		{1, 0, 80 * time.Millisecond},
		{1, 1, 120 * time.Millisecond},
		{1, 7, 120 * time.Millisecond},
		{1, -1, 80 * time.Millisecond},
		{7, 0.5, ReconnectMax},
		{1 << 30, 0.5, ReconnectMax},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, ReconnectDelay(tt.n, tt.r), "n=%d r=%v", tt.n, tt.r)
	}
}

// A server that goes away and comes back on the same port: the client
// logs the disconnect, its failed attempts and the reconnect.
func TestReconnectsAreLogged(t *testing.T) {
	opts := &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true}
	s, err := embedded.Start(opts)
	require.NoError(t, err)
	url := s.URL()
	var logs testkit.Logs
	c, err := Open(Options{URL: url, Logger: logs.TextLogger(slog.LevelInfo)})
	require.NoError(t, err)
	t.Cleanup(c.Close)

	port := s.Server().Addr().String()
	s.Shutdown()
	logs.WaitContains(t, "reconnect attempt failed")
	host, p, _ := strings.Cut(port, ":")
	var portN int
	_, err = fmtSscan(p, &portN)
	require.NoError(t, err)
	s2, err := embedded.Start(&server.Options{Host: host, Port: portN, NoLog: true, NoSigs: true})
	require.NoError(t, err)
	t.Cleanup(s2.Shutdown)
	logs.WaitContains(t, "nats: reconnected")
	assert.True(t, logs.Contains("nats: disconnected; reconnecting"), logs.String())
	assert.True(t, c.NC.IsConnected())
}

func fmtSscan(s string, n *int) (int, error) { return fmt.Sscan(s, n) }
