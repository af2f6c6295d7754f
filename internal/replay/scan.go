package replay

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/pricing"
	"github.com/agentledger/ledger/internal/projection"
)

// Options are shared by the replays.
type Options struct {
	// Apply is the merge to replay under; nil is the current rule,
	// projection.Priced with the catalog of ledger_prices (see
	// pricedApply). It is a seam for tests.
	Apply projection.ApplyFunc
	// Catalog is this build's default price catalog; nil is
	// pricing.Default() (a seam, as projection.Config.Catalog).
	Catalog *pricing.Catalog
	// Progress, when set, is called now and then with the stream sequence
	// reached and the last one the replay will read.
	Progress func(done, total uint64)
	// MaxDiffs, for Verify, is how many differences Drift.Diffs keeps (the
	// first in report order); 0 keeps all. The counts cover all.
	MaxDiffs int

	bounds limits // Verify's memory bounds; zero: defaultLimits
}

// stored is one message of the stream as the replay sees it.
type stored struct {
	seq     uint64
	time    time.Time
	subject string
	data    []byte
}

// scan delivers the messages of LEDGER_ATTEMPTS in stream order, from
// sequence from (1: the first) through last, to fn, which returns false to
// stop early.
func scan(ctx context.Context, stream jetstream.Stream, maxPayload int64, from, last uint64, progress func(done, total uint64), fn func(stored) bool) error {
	if progress == nil {
		progress = func(uint64, uint64) {}
	}
	if last == 0 || from > last {
		progress(last, last)
		return nil
	}
	occ := jetstream.OrderedConsumerConfig{FilterSubjects: []string{names.AttemptsSubjects}}
	if from > 1 {
		occ.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		occ.OptStartSeq = from
	}
	cons, err := stream.OrderedConsumer(ctx, occ)
	if err != nil {
		return fmt.Errorf("replay: reading %s: %w", names.AttemptsStream, err)
	}
	it, err := readPull(cons, maxPayload, 10_000)
	if err != nil {
		return fmt.Errorf("replay: reading %s: %w", names.AttemptsStream, err)
	}
	defer it.stop()
	var seq uint64
	for n := 0; seq < last; n++ {
		m, err := it.next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("replay: reading %s: %w", names.AttemptsStream, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("replay: a message without metadata: %w", err)
		}
		seq = md.Sequence.Stream
		if seq > last {
			break
		}
		if !fn(stored{seq: seq, time: md.Timestamp, subject: m.Subject(), data: m.Data()}) {
			break
		}
		if n%1024 == 0 {
			progress(seq, last)
		}
	}
	progress(min(seq, last), last)
	return nil
}
