package topology

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/names"
)

// ErrNoAttempts is returned by PrepareAttempts when LEDGER_ATTEMPTS does
// not exist and it was not asked to create it.
var ErrNoAttempts = errors.New("stream " + names.AttemptsStream + " does not exist")

// PrepareAttempts makes sure LEDGER_ATTEMPTS exists for a publisher of
// attempt events. With create nil it only looks the stream up
// (ErrNoAttempts when it is missing: normally the aggregator creates it).
// Otherwise it creates the stream with *create when it is missing, and
// logs a warning for each setting of an existing stream that differs
// from *create (JetStream keeps the existing one).
func PrepareAttempts(ctx context.Context, js jetstream.JetStream, create *Config, logger *slog.Logger) error {
	if create == nil {
		_, err := js.Stream(ctx, names.AttemptsStream)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			return ErrNoAttempts
		case err != nil:
			return fmt.Errorf("looking up stream %s: %w", names.AttemptsStream, err)
		}
		return nil
	}
	diffs, err := Check(ctx, js, *create)
	if err != nil {
		return err
	}
	Warn(logger, diffs)
	_, err = EnsureAttempts(ctx, js, *create)
	return err
}

// Warn logs each difference as a warning, with its fields as attributes.
func Warn(logger *slog.Logger, diffs []Difference) {
	for _, d := range diffs {
		logger.Warn(d.String(), "resource", d.Resource, "setting", d.Setting, "want", d.Want, "have", d.Have, "fix", d.Fix)
	}
}
