package ledger

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/fleet"
	"github.com/agentledger/ledger/internal/guard"
)

// FleetConfig configures WithFleetLimits. The zero value is valid.
type FleetConfig struct {
	// Process names this process in the shared state (default
	// <hostname>-<pid>-<random>). It must be unique in the fleet and at
	// most 128 bytes.
	Process string
	// Wait bounds how long a call waits for the shared state (a chunk of
	// rate-limit capacity, the probe's claim, a retry from the budget)
	// before this process decides alone (default 100 ms).
	Wait time.Duration
	// Logger is told, once each, when this process starts and stops
	// deciding alone (NATS unreachable or slow). Nil discards it.
	Logger *slog.Logger
}

type fleetOption struct {
	conn *Conn
	cfg  FleetConfig
}

// WithFleetLimits makes the guards of each upstream (a Call's Upstream,
// by default its provider and model) the fleet's: every process that
// uses them on conn's NATS, Go agents and gateway replicas alike, shares
// one circuit breaker (configured by WithBreaker; one process's failures
// open it for all, and after the cooldown the fleet sends one probe),
// the rate limits learned from the providers' rate-limit headers (the
// fleet stays under them together, and a 429 holds every process until
// its reset), and a retry budget (retries at most 20 % of first attempts
// plus 10, over a sliding minute). The state is kept in the KV bucket
// ledger_upstreams (docs/fleet.md).
//
// NewMiddleware waits until the shared state is ready, for at most 10 s.
// When NATS is unreachable or slow, each process decides with its own
// state within Wait, and the log says so once. Waiting for capacity is no
// attempt and publishes no event; a call refused by a guard ends with an
// event of kind circuit_open or rate_limit, and its CallError's Reason is
// StopCircuitOpen, StopRateLimit or StopBudget. Close the middleware to
// leave the fleet.
func WithFleetLimits(conn *Conn, c FleetConfig) MiddlewareOption {
	return func(o *middlewareOptions) error {
		switch {
		case conn == nil:
			return invalid("WithFleetLimits", "conn must not be nil")
		case c.Wait < 0:
			return invalid("WithFleetLimits", "Wait is %s; it must not be negative (0 selects %s)", c.Wait, fleet.DefaultWait)
		case len(c.Process) > 128:
			return invalid("WithFleetLimits", "Process is %d bytes long; it must be at most 128", len(c.Process))
		}
		o.fleet = &fleetOption{conn: conn, cfg: c}
		return nil
	}
}

// guards opens this process's part of the fleet's state and returns the
// guards on it, with the breakers of b.
func (f *fleetOption) guards(b breaker.Config) (*guard.Set, func(), error) {
	gs, closeFleet, err := fleet.Guards(context.Background(), f.conn.c.NC, f.conn.c.JS, true,
		fleet.Options{Process: f.cfg.Process, Wait: f.cfg.Wait, Logger: f.cfg.Logger},
		guard.Standard(b))
	if err != nil {
		return nil, nil, fmt.Errorf("ledger: WithFleetLimits: %w", err)
	}
	return gs, closeFleet, nil
}
