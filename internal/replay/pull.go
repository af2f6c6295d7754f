package replay

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/projection"
)

// pullReader reads a consumer in order, one message at a time, however
// slowly its reader takes them: a slow reader holds the pull back, it
// never makes the client drop a message.
//
// It reads through Consume, not Messages. Messages queues what the server
// sends in a channel exactly as long as a pull's messages; a full channel
// drops (a "slow consumer", which fails Verify). The server sends more
// than the messages: a pull asked with a byte limit (projection.PullLimits)
// that ends on its message count is followed by a "409 Batch Completed"
// status, and idle heartbeats come while a pull waits. So a reader that
// paused while a pull arrived lost the status, and Verify failed with
// ErrSlowConsumer under load (make bench, issue 19). Consume queues in the
// subscription (the client's limits, 500,000 messages and 64 MiB, far
// above a pull and its statuses), and its handler waits for the reader
// here: it asks for more only when the reader has taken half of a pull.
type pullReader struct {
	msgs   chan jetstream.Msg
	quit   chan struct{}
	cc     jetstream.ConsumeContext
	mu     sync.Mutex
	last   error // the last error the consumer reported
	closed <-chan struct{}
	once   sync.Once
}

// readPull starts reading cons with at most messages (and PullBytes) per
// pull request.
func readPull(cons jetstream.Consumer, maxPayload int64, messages int) (*pullReader, error) {
	r := &pullReader{msgs: make(chan jetstream.Msg), quit: make(chan struct{})}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		select {
		case r.msgs <- m:
		case <-r.quit:
		}
	}, projection.PullLimits(maxPayload, messages), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		r.mu.Lock()
		r.last = err
		r.mu.Unlock()
	}))
	if err != nil {
		return nil, err
	}
	r.cc, r.closed = cc, cc.Closed()
	return r, nil
}

// errConsumerStopped means the consumer stopped (the connection closed)
// before the reader had every message.
var errConsumerStopped = errors.New("the consumer stopped")

// next waits for the next message.
func (r *pullReader) next(ctx context.Context) (jetstream.Msg, error) {
	select {
	case m := <-r.msgs:
		return m, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-r.closed:
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.last != nil {
			return nil, fmt.Errorf("%w: %w", errConsumerStopped, r.last)
		}
		return nil, errConsumerStopped
	}
}

// stop ends the consumer, releasing a handler waiting for the reader.
func (r *pullReader) stop() {
	r.once.Do(func() {
		close(r.quit)
		r.cc.Stop()
	})
}
