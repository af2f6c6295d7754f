package replay

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
)

// ErrSlowConsumer means the NATS client dropped messages while verify
// read (a subscription's pending limit was exceeded: "slow consumer,
// messages dropped"). Whatever was compared, something may have been
// skipped, so verify could not compare: it never says "identical" then.
var ErrSlowConsumer = errors.New("replay: the NATS client dropped messages (slow consumer); could not compare")

// slowWatch notices every slow consumer the connection reports while
// verify runs: on the connection's error callback (asynchronous), and in
// its last error (set when the message is dropped).
type slowWatch struct {
	nc       *nats.Conn
	prev     nats.ErrHandler
	before   error // the connection's last error when the watch began
	seen     atomic.Bool
	subject  atomic.Value // string: the subscription that dropped
	stopOnce sync.Once
}

// watchSlowConsumer starts watching nc until stop.
func watchSlowConsumer(nc *nats.Conn) *slowWatch {
	w := &slowWatch{nc: nc, prev: nc.ErrorHandler(), before: nc.LastError()}
	nc.SetErrorHandler(func(c *nats.Conn, s *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrSlowConsumer) {
			w.seen.Store(true)
			if s != nil {
				w.subject.Store(s.Subject)
			}
		}
		if w.prev != nil {
			w.prev(c, s, err)
		}
	})
	return w
}

// err returns ErrSlowConsumer (wrapped) if a slow consumer was reported
// since the watch began.
func (w *slowWatch) err() error {
	last := w.nc.LastError()
	if !w.seen.Load() && !(errors.Is(last, nats.ErrSlowConsumer) && !errors.Is(w.before, nats.ErrSlowConsumer)) {
		return nil
	}
	if s, ok := w.subject.Load().(string); ok {
		return fmt.Errorf("%w (on %s)", ErrSlowConsumer, s)
	}
	return ErrSlowConsumer
}

// stop gives the connection its error callback back.
func (w *slowWatch) stop() {
	w.stopOnce.Do(func() { w.nc.SetErrorHandler(w.prev) })
}
