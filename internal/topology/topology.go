package topology

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/names"
)

// ErrInvalidConfig is wrapped by every configuration error of this package.
var ErrInvalidConfig = errors.New("topology: invalid config")

// Config sizes the ledger's resources. The zero value is the default.
type Config struct {
	// DuplicateWindow is how long JetStream remembers a Nats-Msg-Id to drop
	// a re-sent event. Default 2 minutes.
	DuplicateWindow time.Duration
	// Replicas of every stream and bucket. Default 1.
	Replicas int
	// MaxAge of the attempt stream; 0 keeps events forever (the default).
	MaxAge time.Duration
	// MaxMsgSize is the largest message LEDGER_ATTEMPTS stores, headers
	// and body. Default (0) events.MaxEventMsgBytes: every body the
	// contract allows with room for its headers, and nothing much larger.
	// It may be larger (bodies over events.MaxEventBytes are then stored
	// and rejected as too_large), never smaller: it would refuse events
	// the contract allows.
	MaxMsgSize int32
}

// DefaultDuplicateWindow is the attempt stream's default duplicate window.
const DefaultDuplicateWindow = 2 * time.Minute

func (c Config) withDefaults() (Config, error) {
	if c.DuplicateWindow == 0 {
		c.DuplicateWindow = DefaultDuplicateWindow
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.MaxMsgSize == 0 {
		c.MaxMsgSize = events.MaxEventMsgBytes
	}
	switch {
	case c.DuplicateWindow < 0:
		return c, fmt.Errorf("%w: duplicate window %s must be positive", ErrInvalidConfig, c.DuplicateWindow)
	case c.Replicas < 1 || c.Replicas > 5:
		return c, fmt.Errorf("%w: replicas %d must be 1 to 5", ErrInvalidConfig, c.Replicas)
	case c.MaxAge < 0:
		return c, fmt.Errorf("%w: max age %s must not be negative", ErrInvalidConfig, c.MaxAge)
	case c.MaxAge > 0 && c.MaxAge < c.DuplicateWindow:
		return c, fmt.Errorf("%w: max age %s must not be shorter than the duplicate window %s", ErrInvalidConfig, c.MaxAge, c.DuplicateWindow)
	case c.MaxMsgSize < events.MaxEventMsgBytes:
		return c, fmt.Errorf("%w: max message size %d must be at least %d bytes, the largest event the contract allows (%d) and its headers",
			ErrInvalidConfig, c.MaxMsgSize, events.MaxEventMsgBytes, events.MaxEventBytes)
	}
	return c, nil
}

// AttemptsStreamConfig is the configuration of LEDGER_ATTEMPTS.
func AttemptsStreamConfig(c Config) (jetstream.StreamConfig, error) {
	c, err := c.withDefaults()
	if err != nil {
		return jetstream.StreamConfig{}, err
	}
	return jetstream.StreamConfig{
		Name:        names.AttemptsStream,
		Description: "Usage ledger: every attempt of every model call (wire contract v1). Immutable.",
		Subjects:    []string{names.AttemptsSubjects},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Duplicates:  c.DuplicateWindow,
		MaxAge:      c.MaxAge,
		Replicas:    c.Replicas,
		MaxMsgSize:  c.MaxMsgSize,
		DenyDelete:  true,
		DenyPurge:   true,
		// Direct gets (batched last-by-subject reads) serve verify.
		AllowDirect: true,
		Discard:     jetstream.DiscardOld,
	}, nil
}

// EnsureAttempts creates LEDGER_ATTEMPTS when it is missing and returns it.
func EnsureAttempts(ctx context.Context, js jetstream.JetStream, c Config) (jetstream.Stream, error) {
	cfg, err := AttemptsStreamConfig(c)
	if err != nil {
		return nil, err
	}
	return ensureStream(ctx, js, cfg)
}

// EnsureRejected creates LEDGER_REJECTED when it is missing and returns it.
func EnsureRejected(ctx context.Context, js jetstream.JetStream, c Config) (jetstream.Stream, error) {
	return EnsureRejectedAs(ctx, js, c, names.RejectedStream, names.RejectedSubjects)
}

// EnsureRejectedAs creates a stream laid out like LEDGER_REJECTED under
// another name and subjects (a rebuild's scratch copy).
func EnsureRejectedAs(ctx context.Context, js jetstream.JetStream, c Config, name, subjects string) (jetstream.Stream, error) {
	c, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	return ensureStream(ctx, js, jetstream.StreamConfig{
		Name:        name,
		Description: "Usage ledger: attempt events the aggregator refused, once each, with the reason.",
		Subjects:    []string{subjects},
		Storage:     jetstream.FileStorage,
		Duplicates:  c.DuplicateWindow,
		Replicas:    c.Replicas,
		// A rejection keeps at most events.MaxEventBytes of the body.
		MaxMsgSize: events.MaxRejectedMsgBytes,
		// Not DenyPurge: a rebuild replaces the rejections with those of
		// the current code.
	})
}

func ensureStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	s, err := js.Stream(ctx, cfg.Name)
	if err == nil {
		return s, nil
	}
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("topology: looking up stream %s: %w", cfg.Name, err)
	}
	s, err = js.CreateStream(ctx, cfg)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		// Another process created it between our lookup and create.
		return js.Stream(ctx, cfg.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("topology: creating stream %s: %w", cfg.Name, err)
	}
	return s, nil
}

// EnsureBucket creates the KV bucket when it is missing and returns it.
// Projection buckets keep one revision per key on file storage, without
// a TTL. An existing bucket whose TTL or history breaks the ledger's
// rules (Compare) is refused with a *SettingsError that says how to fix
// it; its other differences are for Check to warn about.
func EnsureBucket(ctx context.Context, js jetstream.JetStream, c Config, bucket, description string) (jetstream.KeyValue, error) {
	c, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	kv, err := js.KeyValue(ctx, bucket)
	if err == nil {
		s, err := js.Stream(ctx, "KV_"+bucket)
		if err != nil {
			return nil, fmt.Errorf("topology: looking up bucket %s: %w", bucket, err)
		}
		if err := Breaking(compareBucket(bucket, s.CachedInfo().Config)); err != nil {
			return nil, err
		}
		return kv, nil
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("topology: looking up bucket %s: %w", bucket, err)
	}
	kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      bucket,
		Description: description,
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    c.Replicas,
	})
	if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return js.KeyValue(ctx, bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("topology: creating bucket %s: %w", bucket, err)
	}
	return kv, nil
}
