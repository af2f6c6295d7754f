package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/cli"
	"github.com/agentledger/ledger/internal/connect"
	"github.com/agentledger/ledger/internal/emit"
	"github.com/agentledger/ledger/internal/fleet"
	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/topology"
)

// ledgerConn is the gateway's link to the ledger: the NATS connection,
// the publisher of the attempt events, the bucket of attempt numbers and
// the upstreams' guards (shared by the fleet with --fleet-limits on).
type ledgerConn struct {
	conn        *connect.Conn
	pub         *emit.Publisher
	attempts    jetstream.KeyValue
	guards      *guard.Set
	closeGuards func()
	drain       time.Duration
	// ctx is openLedger's, ended as soon as the server refuses a
	// permission (connect.Conn.Guard); unguard releases it.
	ctx     context.Context
	unguard context.CancelFunc
}

// openLedger connects, checks (or, asked to, creates) LEDGER_ATTEMPTS,
// ensures the gateway's bucket and starts the publisher.
func openLedger(ctx context.Context, f *flags, logger *slog.Logger) (*ledgerConn, error) {
	o := f.conn
	o.Name, o.Logger = "ledger-gateway", logger
	conn, err := connect.Open(o)
	if err != nil {
		return nil, &cli.ExitError{Code: cli.ExitUsage, Err: err}
	}
	ctx, unguard := conn.Guard(ctx)
	fail := func(err error) (*ledgerConn, error) {
		unguard()
		conn.Close()
		return nil, &cli.ExitError{Code: cli.ExitUsage, Err: conn.Explain(err)}
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var create *topology.Config
	if f.create {
		create = &f.topo
	}
	if err := topology.PrepareAttempts(sctx, conn.JS, create, logger); err != nil {
		if errors.Is(err, topology.ErrNoAttempts) {
			err = fmt.Errorf("%w: start the aggregator first, or pass --create-stream", err)
		}
		return fail(err)
	}
	kv, err := topology.EnsureGatewayAttempts(sctx, conn.JS, f.topo, f.attemptsTTL)
	if err != nil {
		return fail(err)
	}
	gcfg, err := f.guardConfig()
	if err != nil {
		return fail(err)
	}
	guards, closeGuards, err := fleet.Guards(ctx, conn.NC, conn.JS, f.fleetLimits == "on",
		fleet.Options{Wait: f.fleetWait, Topology: f.topo, Logger: logger}, gcfg)
	if err != nil {
		return fail(err)
	}
	opts := []emit.Option{emit.WithErrorHandler(func(err error) { logger.Warn("publish failed; retrying", slog.Any("error", err)) })}
	if f.create {
		opts = append(opts, emit.WithEnsureStream(f.topo))
	}
	if f.outbox != "" {
		opts = append(opts, emit.WithOutbox(f.outbox), emit.WithOutboxLimits(f.outboxEvents, f.outboxBytes))
	}
	pub, err := emit.New(conn.JS, opts...)
	if err != nil {
		closeGuards()
		return fail(err)
	}
	if st := pub.Stats(); st.Recovered > 0 {
		logger.Warn("gateway: delivering the events an earlier run left in the outbox", "outbox", f.outbox, "events", st.Recovered)
	}
	return &ledgerConn{conn: conn, pub: pub, attempts: kv, guards: guards, closeGuards: closeGuards, drain: f.drainTimeout,
		ctx: ctx, unguard: unguard}, nil
}

// close flushes the events (within the drain timeout, even when ctx is
// done) and closes the connection.
func (l *ledgerConn) close(ctx context.Context, logger *slog.Logger) (emit.Stats, error) {
	// The drain ends early only when the server refuses a permission:
	// retrying until the drain timeout could not help.
	gctx, unguard := l.conn.Guard(context.WithoutCancel(ctx))
	defer unguard()
	dctx, cancel := context.WithTimeout(gctx, l.drain)
	defer cancel()
	st, err := l.pub.Close(dctx)
	var ue *emit.UndeliveredError
	switch {
	case errors.As(err, &ue) && ue.AllKept():
		// Not lost: the next start with the same --outbox delivers them.
		logger.Warn("gateway: events kept in the outbox for the next start", "kept", st.Kept, "outbox", ue.Outbox, "error", err)
		st.Undelivered, err = 0, nil
	case err != nil:
		logger.Error("gateway: events undelivered", "undelivered", st.Undelivered, "error", err)
	}
	l.closeGuards()
	l.unguard()
	l.conn.Close()
	return st, err
}
