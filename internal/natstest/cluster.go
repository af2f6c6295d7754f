package natstest

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/embedded"
)

// Cluster is a JetStream cluster of embedded servers, in process, on
// loopback ports, each with its own temporary store.
type Cluster struct {
	t       testing.TB
	mu      sync.Mutex
	servers []*embedded.Server // nil once killed
	names   []string
}

// StartCluster runs a JetStream cluster of n servers for the test and
// shuts it down at cleanup. It returns once the cluster has elected a
// meta leader that sees every server, and every server is current.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	ports := freePorts(t, n)
	routes := make([]*url.URL, n)
	for i, p := range ports {
		routes[i] = &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", p)}
	}
	c := &Cluster{t: t}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("n%d", i+1)
		opts := &server.Options{
			ServerName: name,
			Host:       "127.0.0.1",
			Port:       server.RANDOM_PORT,
			JetStream:  true,
			StoreDir:   t.TempDir(),
			NoLog:      true,
			NoSigs:     true,
			Cluster:    server.ClusterOpts{Name: "ledger-test", Host: "127.0.0.1", Port: ports[i]},
			Routes:     routes,
		}
		s, err := embedded.Start(opts)
		if err != nil {
			t.Fatalf("natstest: starting %s: %v", name, err)
		}
		c.servers = append(c.servers, s)
		c.names = append(c.names, name)
	}
	t.Cleanup(c.shutdown)
	c.waitMetaLeader()
	return c
}

func (c *Cluster) waitMetaLeader() {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	n := len(c.alive())
	for time.Now().Before(deadline) {
		current := 0
		leaderSeesAll := false
		for _, s := range c.alive() {
			if s.Server().JetStreamIsCurrent() {
				current++
			}
			if s.Server().JetStreamIsLeader() && len(s.Server().JetStreamClusterPeers()) == n {
				leaderSeesAll = true
			}
		}
		if leaderSeesAll && current == n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatal("natstest: the cluster's JetStream was not ready within 30s")
}

func (c *Cluster) alive() []*embedded.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*embedded.Server
	for _, s := range c.servers {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}

// URLs is every server's client URL, comma separated, as nats.Connect
// takes them.
func (c *Cluster) URLs() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	urls := make([]string, 0, len(c.servers))
	for _, s := range c.servers {
		if s != nil {
			urls = append(urls, s.URL())
		}
	}
	return strings.Join(urls, ",")
}

// Connect opens a connection to the cluster that reconnects forever,
// closed at cleanup.
func (c *Cluster) Connect(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(c.URLs(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("natstest: connecting to the cluster: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("natstest: jetstream: %v", err)
	}
	return nc, js
}

// Kill shuts down the server named name at once, as a crash would.
func (c *Cluster) Kill(name string) {
	c.t.Helper()
	c.mu.Lock()
	var s *embedded.Server
	for i, n := range c.names {
		if n == name && c.servers[i] != nil {
			s, c.servers[i] = c.servers[i], nil
		}
	}
	c.mu.Unlock()
	if s == nil {
		c.t.Fatalf("natstest: no live server named %q", name)
	}
	s.Shutdown()
}

func (c *Cluster) shutdown() {
	for _, s := range c.alive() {
		s.Shutdown()
	}
}

// freePorts returns n loopback ports that were free a moment ago.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, n)
	var lns []net.Listener
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("natstest: finding a free port: %v", err)
		}
		lns = append(lns, ln)
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	for _, ln := range lns {
		_ = ln.Close()
	}
	return ports
}
