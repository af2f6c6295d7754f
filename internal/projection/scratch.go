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
	n.Rollups = names.RebuildScratchRollups(id)
	return n
}

// rebuildHolderPrefix starts the instance ID of a rebuild's leases; the
// rest is the ID of its scratch set.
const rebuildHolderPrefix = "rebuild-"

// scratchStreams are the streams of a scratch set: the four buckets'
// and the rejections'.
func (n Names) scratchStreams() []string {
	return []string{"KV_" + n.Requests, "KV_" + n.Sessions, "KV_" + n.State, n.Rejected, "KV_" + n.Rollups}
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
// no recorded switch refers to, whose rebuild does not hold the live
// lease, and that no claim but this rebuild's own owns. It lists the sets
// first and reads the claim, the live lease and the checkpoint after, in
// that order, so a set it deletes existed before it saw its own claim in
// force: it belongs to a rebuild that lost the claim (or finished) before
// this one took it, or to this one. Such a rebuild records a switch only
// while it holds the live lease and after it has seen its own claim, so
// if it does not hold the lease now it never will have recorded a switch
// to the set unseen. If the claim is not this rebuild's any more, it
// deletes its own set only. See the package comment.
func (r *rebuild) dropScratch(ctx context.Context) error {
	sets, err := scratchSets(ctx, r.cfg.JS)
	if err != nil || len(sets) == 0 {
		return err
	}
	own, err := r.holdsClaim(ctx)
	if err != nil {
		return err
	}
	lease, err := holderOf(ctx, r.live.state, names.LeaseKey)
	if err != nil {
		return err
	}
	cp, _, err := readCheckpoint(ctx, r.live.state)
	if err != nil {
		return err
	}
	for id, streams := range sets {
		switch {
		case cp.Switch != nil && cp.Switch.Scratch == ScratchNames(id):
			continue // a recorded switch copies from it
		case id == r.scratchID: // its own: this rebuild records no switch any more
		case !own, lease == rebuildHolderPrefix+id:
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
	h, err := holderOf(ctx, r.live.state, names.RebuildKey)
	return h == r.id, err
}

// holderOf returns the holder named by lease key in state ("" when none).
func holderOf(ctx context.Context, state jetstream.KeyValue, key string) (string, error) {
	e, err := state.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("projection: reading %s: %w", key, err)
	}
	var v leaseValue
	_ = json.Unmarshal(e.Value(), &v)
	return v.Holder, nil
}
