package fleet

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/topology"
)

// ErrInvalidOptions is wrapped by every error Open returns for Options it
// refuses; the message names the field and the rule.
var ErrInvalidOptions = errors.New("fleet: invalid options")

// Defaults of Options.
const (
	DefaultWait      = 100 * time.Millisecond
	DefaultHeartbeat = time.Second
)

// Options configure a Fleet. The zero value is valid.
type Options struct {
	// Process names this process in the shared state; default
	// <hostname>-<pid>-<random>. It must be unique in the fleet.
	Process string
	// Wait bounds each NATS operation a call waits for (a chunk of
	// capacity, the probe's claim, a retry from the budget): past it the
	// call goes on with its local state. Default 100 ms.
	Wait time.Duration
	// Heartbeat is how often the process writes its heartbeat and its
	// batched first attempts, and retries a lost connection's shared
	// state. Default 1 s.
	Heartbeat time.Duration
	// Topology sizes the bucket when this process creates it (replicas).
	Topology topology.Config
	// Now is the clock; nil selects time.Now.
	Now func() time.Time
	// Logger receives the changes of mode (degraded, restored), once
	// each. Nil discards them.
	Logger *slog.Logger
	// OnBreakerChange, when set, is told every change of state of the
	// fleet's breaker of an upstream, whichever process made it, as the
	// watcher delivers it (in order, on the watcher's goroutine: it must
	// be quick). The first record of an upstream seen counts as a change
	// from closed.
	OnBreakerChange func(upstream string, from, to breaker.State)
}

func (o Options) withDefaults() (Options, error) {
	switch {
	case o.Wait < 0:
		return o, fmt.Errorf("%w: Wait is %s; it must not be negative (0 selects %s)", ErrInvalidOptions, o.Wait, DefaultWait)
	case o.Heartbeat < 0:
		return o, fmt.Errorf("%w: Heartbeat is %s; it must not be negative (0 selects %s)", ErrInvalidOptions, o.Heartbeat, DefaultHeartbeat)
	case len(o.Process) > 128:
		return o, fmt.Errorf("%w: Process is %d bytes long; it must be at most 128", ErrInvalidOptions, len(o.Process))
	}
	if o.Wait == 0 {
		o.Wait = DefaultWait
	}
	if o.Heartbeat == 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.Process == "" {
		o.Process = defaultProcess()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// defaultProcess is <hostname>-<pid>-<4 random bytes>.
func defaultProcess() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
}
