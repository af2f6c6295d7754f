package emit

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/topology"
)

// Defaults of the options.
const (
	// DefaultBufferSize is how many marshalled events Publish can enqueue
	// ahead of the background loop before it blocks.
	DefaultBufferSize = 8192
	// DefaultMaxInFlight is how many events the loop holds at once: sent
	// and awaiting their ack, or failed and awaiting their retry. Measured
	// against the embedded server, windows below 2048 cost throughput and
	// larger ones gain nothing.
	DefaultMaxInFlight = 4096
	// DefaultAckTimeout is how long the loop waits for the ack of one
	// publish before it retries it.
	DefaultAckTimeout = 5 * time.Second
	// DefaultBackoffBase and DefaultBackoffMax bound the wait before a
	// failed event is retried (see Backoff).
	DefaultBackoffBase = 50 * time.Millisecond
	DefaultBackoffMax  = 5 * time.Second
)

// Option configures a Publisher. An invalid option makes New fail with an
// error wrapping ErrInvalidOption.
type Option func(*options) error

type options struct {
	bufferSize  int
	maxInFlight int
	ackTimeout  time.Duration
	backoffBase time.Duration
	backoffMax  time.Duration
	ensure      bool
	topology    topology.Config
	onError     func(error)
	clock       Clock
	rand        func() float64

	outboxDir       string
	outboxMaxEvents int
	outboxMaxBytes  int64
}

func defaultOptions() options {
	return options{
		bufferSize:  DefaultBufferSize,
		maxInFlight: DefaultMaxInFlight,
		ackTimeout:  DefaultAckTimeout,
		backoffBase: DefaultBackoffBase,
		backoffMax:  DefaultBackoffMax,
		clock:       SystemClock,
		rand:        rand.Float64,

		outboxMaxEvents: DefaultOutboxMaxEvents,
		outboxMaxBytes:  DefaultOutboxMaxBytes,
	}
}

func invalid(option, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidOption, option, fmt.Sprintf(format, args...))
}

// WithBufferSize sets how many events Publish can enqueue ahead of the
// background loop before it blocks (default DefaultBufferSize). At most
// size + max in-flight events are held in memory. size must be at least 1.
func WithBufferSize(size int) Option {
	return func(o *options) error {
		if size < 1 {
			return invalid("WithBufferSize", "size %d must be at least 1", size)
		}
		o.bufferSize = size
		return nil
	}
}

// WithMaxInFlight sets how many events the loop holds at once, sent and
// awaiting their ack or failed and awaiting their retry (default
// DefaultMaxInFlight). It bounds the publish pipeline. The Publisher
// publishes through a JetStream context of its own, sized to the window;
// only when js has no connection (js.Conn() is nil) does it publish
// through js, whose WithPublishAsyncMaxPending must then be at least n or
// publishes stall. n must be at least 1.
func WithMaxInFlight(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return invalid("WithMaxInFlight", "n %d must be at least 1", n)
		}
		o.maxInFlight = n
		return nil
	}
}

// WithAckTimeout sets how long the loop waits for the ack of one publish
// before it counts the publish as failed and retries it (default
// DefaultAckTimeout). d must be positive.
func WithAckTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return invalid("WithAckTimeout", "timeout %s must be positive", d)
		}
		o.ackTimeout = d
		return nil
	}
}

// WithBackoff sets the bounds of the wait before a failed event is retried
// (defaults DefaultBackoffBase and DefaultBackoffMax; see Backoff). base
// must be positive and max at least base.
func WithBackoff(base, max time.Duration) Option {
	return func(o *options) error {
		if base <= 0 {
			return invalid("WithBackoff", "base %s must be positive", base)
		}
		if max < base {
			return invalid("WithBackoff", "max %s must be at least base %s", max, base)
		}
		o.backoffBase, o.backoffMax = base, max
		return nil
	}
}

// WithEnsureStream makes the publisher create LEDGER_ATTEMPTS (with
// topology.EnsureAttempts and cfg) when it is missing: once at start and
// again whenever a publish finds no stream, no more often than the
// backoff allows. A failure is reported to the error handler and retried;
// events stay buffered meanwhile. cfg must be valid for
// topology.AttemptsStreamConfig.
func WithEnsureStream(cfg topology.Config) Option {
	return func(o *options) error {
		if _, err := topology.AttemptsStreamConfig(cfg); err != nil {
			return invalid("WithEnsureStream", "%v", err)
		}
		o.ensure, o.topology = true, cfg
		return nil
	}
}

// WithErrorHandler sets a function told about every failed publish (before
// its retry) and every failed attempt to ensure the stream, for logging
// and metrics. It is called from the background loop, so it must be quick
// and must not call the Publisher. fn must not be nil.
func WithErrorHandler(fn func(error)) Option {
	return func(o *options) error {
		if fn == nil {
			return invalid("WithErrorHandler", "handler must not be nil")
		}
		o.onError = fn
		return nil
	}
}

// WithOutbox keeps every event on disk, in directory dir (created when
// missing), from before Publish returns until the stream acknowledges it:
// Publish writes the event and waits for the fsync (concurrent calls share
// one). New publishes again whatever dir still holds from an earlier
// Publisher that did not finish, a process killed with SIGKILL included;
// the event IDs make that exactly once (see the package documentation).
// The outbox is bounded (WithOutboxLimits): when it is full Publish waits,
// as for a full buffer, and returns an error wrapping ErrOutboxFull when
// its context ends first. One Publisher at a time may use dir: New fails
// when another process holds it. dir must not be empty.
func WithOutbox(dir string) Option {
	return func(o *options) error {
		if dir == "" {
			return invalid("WithOutbox", "directory must not be empty")
		}
		o.outboxDir = dir
		return nil
	}
}

// WithOutboxLimits bounds the outbox of WithOutbox: at most events
// unacknowledged events and bytes bytes of them (defaults
// DefaultOutboxMaxEvents and DefaultOutboxMaxBytes). An empty outbox takes
// one event of any size. The events recovered at New count against the
// limits. events and bytes must be positive.
func WithOutboxLimits(events int, bytes int64) Option {
	return func(o *options) error {
		if events < 1 {
			return invalid("WithOutboxLimits", "events %d must be at least 1", events)
		}
		if bytes < 1 {
			return invalid("WithOutboxLimits", "bytes %d must be at least 1", bytes)
		}
		o.outboxMaxEvents, o.outboxMaxBytes = events, bytes
		return nil
	}
}

// WithClock sets the source of time (default SystemClock). c must not be
// nil.
func WithClock(c Clock) Option {
	return func(o *options) error {
		if c == nil {
			return invalid("WithClock", "clock must not be nil")
		}
		o.clock = c
		return nil
	}
}

// WithRand sets the source of the random values in [0, 1) that jitter the
// backoff (default math/rand/v2.Float64). It is called only from the
// background loop. fn must not be nil.
func WithRand(fn func() float64) Option {
	return func(o *options) error {
		if fn == nil {
			return invalid("WithRand", "rand must not be nil")
		}
		o.rand = fn
		return nil
	}
}

// publisherJSOptions configure the Publisher's own JetStream context.
func publisherJSOptions(o options) []jetstream.JetStreamOpt {
	return []jetstream.JetStreamOpt{
		// Room above the window for publishes the loop gave up on after its
		// own ack timeout, which stay pending in the context until a
		// reconnect or the context's timeout clears them.
		jetstream.WithPublishAsyncMaxPending(2*o.maxInFlight + 64),
	}
}
