package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/connect"
	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/names"
)

// ReadyTimeout bounds how long Guards waits for the shared state at start.
const ReadyTimeout = 10 * time.Second

// Guards returns the guards of cfg for a command: when shared, their
// state is the fleet's (a Fleet opened on nc and js with o, ready within
// ReadyTimeout: a process that cannot reach the shared state at start
// reports it rather than starting alone); otherwise each decision is this
// process's. The returned function closes the Fleet (a no-op when not
// shared); call it after the last call through the guards.
func Guards(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, shared bool, o Options, cfg guard.Config) (*guard.Set, func(), error) {
	closeFleet := func() {}
	if shared {
		f, err := Open(nc, js, o)
		if err != nil {
			return nil, nil, err
		}
		rctx, cancel := context.WithTimeout(ctx, ReadyTimeout)
		defer cancel()
		if err := f.Ready(rctx); err != nil {
			f.abandon()
			if errors.Is(err, connect.ErrPermission) {
				return nil, nil, fmt.Errorf("fleet: this NATS user may not use KV bucket %s (an agent sharing fleet limits needs the agent role's grants, docs/security.md; turning fleet limits off keeps the limits per process): %w", names.UpstreamsBucket, err)
			}
			return nil, nil, fmt.Errorf("fleet: the shared state in KV bucket %s was not ready within %s (is JetStream enabled, and may this user create and watch that bucket? turning fleet limits off keeps the limits per process): %w", names.UpstreamsBucket, ReadyTimeout, err)
		}
		cfg.Shared, closeFleet = f, f.Close
	}
	gs, err := guard.New(cfg)
	if err != nil {
		closeFleet()
		return nil, nil, err
	}
	return gs, closeFleet, nil
}
