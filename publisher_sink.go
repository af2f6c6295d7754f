package ledger

import (
	"github.com/agentledger/ledger/internal/pubsink"
	"github.com/agentledger/ledger/internal/retry"
)

// The public gateway publishes through a *Publisher: it gets the
// publisher inside from package pubsink.
func init() {
	pubsink.Register(func(p any) retry.Sink {
		if pub, ok := p.(*Publisher); ok && pub != nil {
			return pub.p
		}
		return nil
	})
}
