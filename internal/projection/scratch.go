package projection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/names"
)

// ScratchNames are the scratch resources of the rebuild id (a ULID), where
// it projects the stream before it switches the live ledger over. Every
// rebuild has its own (see the package comment, "A rebuild owns its
// scratch"); id "" names the single set of earlier builds.
func ScratchNames(id string) Names {
	var n Names
	n.Requests, n.Sessions, n.State, n.Rejected, n.RejectedPrefix = names.RebuildScratch(id)
	return n
}

// rebuildHolderPrefix starts the instance ID of a rebuild's leases; the
// rest is the ID of its scratch set.
const rebuildHolderPrefix = "rebuild-"

// scratchStreams are the streams of a scratch set: the three buckets'
// and the rejections'.
func (n Names) scratchStreams() []string {
	return []string{"KV_" + n.Requests, "KV_" + n.Sessions, "KV_" + n.State, n.Rejected}
}

// scratchSetOf returns the ID of the scratch set a stream belongs to, if
// it is one.
func scratchSetOf(stream string) (id string, ok bool) {
	rest, ok := strings.CutPrefix(stream, "KV_"+names.RebuildBucketPrefix)
	if !ok {
		if rest, ok = strings.CutPrefix(stream, names.RebuildStreamPrefix); !ok {
			return "", false
		}
	}
	if i := strings.LastIndexByte(rest, '_'); i >= 0 {
		id = rest[:i]
	}
	return id, slices.Contains(ScratchNames(id).scratchStreams(), stream)
}

// scratchSets lists the scratch sets there are: set ID → its streams.
func scratchSets(ctx context.Context, js jetstream.JetStream) (map[string][]string, error) {
	sets := map[string][]string{}
	l := js.StreamNames(ctx)
	for name := range l.Name() {
		if id, ok := scratchSetOf(name); ok {
			sets[id] = append(sets[id], name)
		}
	}
	if err := l.Err(); err != nil {
		return nil, fmt.Errorf("projection: listing streams: %w", err)
	}
	return sets, nil
}

// dropScratch deletes the scratch sets this rebuild may delete: those that
// no recorded switch refers to and no claim but its own owns. It lists
// the sets first and reads the claim and the checkpoint after, so a set it
// deletes existed before it saw its own claim in force: it belongs to a
// rebuild that lost the claim (or finished) before this one took it, or
// to this one. If the claim is not this rebuild's any more, it deletes its
// own set only.
func (r *rebuild) dropScratch(ctx context.Context) error {
	sets, err := scratchSets(ctx, r.cfg.JS)
	if err != nil || len(sets) == 0 {
		return err
	}
	cp, _, err := readCheckpoint(ctx, r.live.state)
	if err != nil {
		return err
	}
	own, err := r.holdsClaim(ctx)
	if err != nil {
		return err
	}
	for id, streams := range sets {
		if cp.Switch != nil && cp.Switch.Scratch == ScratchNames(id) {
			continue // a recorded switch copies from it
		}
		if id != r.scratchID && !own {
			continue
		}
		for _, s := range streams {
			if err := r.cfg.JS.DeleteStream(ctx, s); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
				return fmt.Errorf("projection: deleting scratch stream %s: %w", s, err)
			}
		}
		if id != r.scratchID {
			r.cfg.Logger.Info("rebuild: deleted the scratch ledger of an earlier rebuild", "rebuild", rebuildHolderPrefix+id)
		}
	}
	return nil
}

// errClaimLost means another rebuild took this one's claim.
var errClaimLost = fmt.Errorf("%w: another rebuild took this rebuild's claim", ErrLeaseLost)

// holdsClaim reports whether the rebuild claim is still this rebuild's.
// A rebuild never takes the claim again once it lost it, so if the claim
// names it, nobody else has held it since this rebuild took it.
func (r *rebuild) holdsClaim(ctx context.Context) (bool, error) {
	e, err := r.live.state.Get(ctx, names.RebuildKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("projection: reading %s: %w", names.RebuildKey, err)
	}
	var v leaseValue
	_ = json.Unmarshal(e.Value(), &v)
	return v.Holder == r.id, nil
}
