package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/emit"
	"github.com/agentledger/ledger/internal/topology"
)

// Stream is the name of the JetStream stream of attempt events
// (docs/contract.md).
const Stream = "LEDGER_ATTEMPTS"

var (
	// ErrNoStream is returned by NewPublisher when the stream of attempt
	// events does not exist and WithCreateStream was not given: the
	// aggregator creates it when it starts.
	ErrNoStream = errors.New("ledger: stream " + Stream + " does not exist")
	// ErrPublisherClosed is returned by Flush after Close.
	ErrPublisherClosed = errors.New("ledger: publisher closed")
	// ErrUndelivered is wrapped by the *UndeliveredError Close returns.
	ErrUndelivered = api.ErrUndelivered
)

// StreamConfig is how the stream of attempt events is created when a
// publisher is asked to create it (WithCreateStream). The zero value is
// the default, the same as the aggregator's.
type StreamConfig struct {
	// DuplicateWindow is how long JetStream remembers an event ID to drop
	// a re-sent event (default 2 minutes).
	DuplicateWindow time.Duration
	// Replicas of the stream, 1 to 5 (default 1).
	Replicas int
	// MaxAge of the events; 0 keeps them forever (the default, which the
	// ledger's rebuild and verify need).
	MaxAge time.Duration
}

// PublisherStats count what a publisher did: Enqueued (events
// accepted), Acked (events the stream acknowledged, each once),
// Duplicates (acks saying the stream already held the event: a publish
// retried after it had landed), Retries (publishes made again after a
// failure), Undelivered (events never acknowledged; set by Close),
// Recovered (events read back from the outbox at start, left by an
// earlier publisher; counted in Enqueued too), OutboxEvents and
// OutboxBytes (the outbox's depth: the events kept on disk until the
// stream acknowledges them, 0 without an outbox) and Kept (undelivered
// events left in the outbox for the next publisher on its directory; set
// by Close).
type PublisherStats = api.PublisherStats

// UndeliveredError is what Close returns when some events were never
// acknowledged before its context ended: their Count, the Last publish
// failure seen (or Close's context error), and how many of them are Kept
// in the directory Outbox for the next publisher on it (WithOutbox: all
// of them; kept events are not lost, and AllKept says so). Some may still
// land later; each carries its event ID, so a re-publish is deduplicated
// by the stream. It unwraps to ErrUndelivered and Last.
type UndeliveredError = api.UndeliveredError

// Publisher publishes attempt events to the ledger's stream
// asynchronously: handing it an event never waits on the network, and a
// failed publish is retried with the same event ID (so the stream drops a
// copy that did land) until Close gives up. Create it with NewPublisher
// and end it with Close before closing the connection. It is safe for
// concurrent use.
type Publisher struct {
	p *emit.Publisher
}

// PublisherOption configures NewPublisher.
type PublisherOption func(*publisherOptions) error

type publisherOptions struct {
	emit   []emit.Option
	create *topology.Config
	log    *slog.Logger
}

// WithBufferSize sets how many events can wait to be published before
// handing over another one blocks (default 8192). n must be at least 1.
func WithBufferSize(n int) PublisherOption {
	return emitOption("WithBufferSize", n >= 1, fmt.Sprintf("size %d must be at least 1", n), emit.WithBufferSize(n))
}

// WithMaxInFlight sets how many events are published and awaiting their
// ack, or awaiting their retry, at once (default 4096). n must be at
// least 1.
func WithMaxInFlight(n int) PublisherOption {
	return emitOption("WithMaxInFlight", n >= 1, fmt.Sprintf("n %d must be at least 1", n), emit.WithMaxInFlight(n))
}

// WithAckTimeout sets how long a publish waits for its ack before it is
// retried (default 5 s). d must be positive.
func WithAckTimeout(d time.Duration) PublisherOption {
	return emitOption("WithAckTimeout", d > 0, fmt.Sprintf("timeout %s must be positive", d), emit.WithAckTimeout(d))
}

// WithPublishErrorHandler sets a function told about every failed publish
// before its retry, for logging or metrics. It runs on the publisher's
// goroutine: it must be quick and must not call the publisher. fn must not
// be nil.
func WithPublishErrorHandler(fn func(error)) PublisherOption {
	return emitOption("WithPublishErrorHandler", fn != nil, "handler must not be nil", emit.WithErrorHandler(fn))
}

func emitOption(name string, ok bool, rule string, opt emit.Option) PublisherOption {
	return func(o *publisherOptions) error {
		if !ok {
			return invalid(name, "%s", rule)
		}
		o.emit = append(o.emit, opt)
		return nil
	}
}

// WithOutbox keeps every event on disk, in directory dir (created when
// missing), from before Publish returns until the stream acknowledges it,
// so that a process that stops or is killed during a NATS outage loses
// nothing: NewPublisher on the same directory publishes again what it
// holds, and the event IDs make that exactly once (the stream drops a
// copy within its duplicate window, the ledger counts an event once
// anyway). Each write is fsynced; concurrent Publish calls share one
// fsync. The outbox holds at most 16384 events and 64 MiB: when it is full
// Publish waits for acks, and returns an error when its context ends
// first (the event is refused, not dropped). One publisher at a time may
// use dir. Its depth is in Stats (OutboxEvents, OutboxBytes).
func WithOutbox(dir string) PublisherOption {
	return emitOption("WithOutbox", dir != "", "directory must not be empty", emit.WithOutbox(dir))
}

// WithOutboxLimits bounds the outbox of WithOutbox: at most events
// unacknowledged events and bytes bytes of them (defaults 16384 and
// 64 MiB). When it is full Publish waits for acks, and returns an error
// when its context ends first. events and bytes must be positive.
func WithOutboxLimits(events int, bytes int64) PublisherOption {
	return emitOption("WithOutboxLimits", events >= 1 && bytes >= 1,
		fmt.Sprintf("events %d and bytes %d must be positive", events, bytes), emit.WithOutboxLimits(events, bytes))
}

// WithCreateStream makes NewPublisher create the stream of attempt events
// with cfg when it does not exist (and the publisher create it again if it
// disappears). Without it, NewPublisher refuses to start when the stream
// is missing: normally the aggregator creates it. When the stream exists
// with other settings than cfg asks for, the existing ones are kept and
// NewPublisher logs a warning that says what differs and how to change it
// (see WithPublisherLogger).
func WithCreateStream(cfg StreamConfig) PublisherOption {
	return func(o *publisherOptions) error {
		tc := topology.Config{DuplicateWindow: cfg.DuplicateWindow, Replicas: cfg.Replicas, MaxAge: cfg.MaxAge}
		if _, err := topology.AttemptsStreamConfig(tc); err != nil {
			return invalid("WithCreateStream", "%v", err)
		}
		o.create = &tc
		return nil
	}
}

// WithPublisherLogger sets the logger of the publisher's warnings: a
// stream whose settings differ from WithCreateStream's (default: the
// slog default logger).
func WithPublisherLogger(l *slog.Logger) PublisherOption {
	return func(o *publisherOptions) error {
		if l == nil {
			return invalid("WithPublisherLogger", "logger must not be nil")
		}
		o.log = l
		return nil
	}
}

// NewPublisher checks that the stream of attempt events exists (or
// creates it, with WithCreateStream) and starts a publisher on js. The
// caller owns the publisher and must Close it before closing the
// connection.
func NewPublisher(ctx context.Context, js jetstream.JetStream, opts ...PublisherOption) (*Publisher, error) {
	o := publisherOptions{log: slog.Default()}
	for _, opt := range opts {
		if opt == nil {
			return nil, invalid("NewPublisher", "nil option")
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if js == nil {
		return nil, invalid("NewPublisher", "jetstream must not be nil")
	}
	if err := prepareStream(ctx, js, o); err != nil {
		return nil, err
	}
	if o.create != nil {
		o.emit = append(o.emit, emit.WithEnsureStream(*o.create))
	}
	p, err := emit.New(js, o.emit...)
	if err != nil {
		return nil, invalid("NewPublisher", "%v", err)
	}
	return &Publisher{p: p}, nil
}

// prepareStream makes sure the stream exists, creating it when asked and
// warning about settings that differ from those asked for.
func prepareStream(ctx context.Context, js jetstream.JetStream, o publisherOptions) error {
	err := topology.PrepareAttempts(ctx, js, o.create, o.log)
	switch {
	case errors.Is(err, topology.ErrNoAttempts):
		return fmt.Errorf("%w: start the aggregator first, or create it with WithCreateStream", ErrNoStream)
	case err != nil:
		return fmt.Errorf("ledger: %w", err)
	}
	return nil
}

// Flush waits until every event handed over before the call is
// acknowledged by the stream. When ctx ends first it returns an error
// wrapping ctx's that says how many events are still pending; after Close
// it returns ErrPublisherClosed.
func (p *Publisher) Flush(ctx context.Context) error {
	err := p.p.Flush(ctx)
	var pe *emit.PendingError
	switch {
	case errors.As(err, &pe):
		return fmt.Errorf("ledger: flush: %d event(s) still pending: %w", pe.Pending, pe.Err)
	case errors.Is(err, emit.ErrClosed):
		return ErrPublisherClosed
	}
	return err
}

// Stats returns the counters so far. Undelivered is 0 until Close
// returns.
func (p *Publisher) Stats() PublisherStats { return p.p.Stats() }

// Close stops accepting events, keeps publishing and retrying those
// buffered until all are acknowledged or ctx ends (ctx's deadline is the
// drain timeout), and stops the publisher's goroutine. It returns the
// final counters and, when some events were never acknowledged, an
// *UndeliveredError. Close is idempotent.
func (p *Publisher) Close(ctx context.Context) (PublisherStats, error) {
	return p.p.Close(ctx)
}
