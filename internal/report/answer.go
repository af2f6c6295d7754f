package report

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/projection"
)

// Answer answers q from the live ledger, reading only what its source
// needs (Query.Source): the rollups of the hours in range, of the
// coarsest grain that answers q exactly (Query.Grain, given
// projection.LedgerRollupGrains; Result.Grain says which), the session
// records, or, for --by request only, every request record.
func Answer(ctx context.Context, js jetstream.JetStream, q Query) (*Result, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	applied, last, err := position(ctx, js)
	if err != nil {
		return nil, err
	}
	var r *Result
	switch q.Source() {
	case FromRollups:
		all, err := projection.LedgerRollupGrains(ctx, js)
		if err != nil {
			return nil, err
		}
		if r, err = answerRollups(ctx, js, q, q.Grain(all)); err != nil {
			return nil, err
		}
		r.Coarser = q.Grain(true)
	case FromSessions:
		l, err := Load(ctx, js, "")
		if err != nil {
			return nil, err
		}
		r = GroupSessions(l.Sessions, q)
	case FromRequests:
		if r, err = scanRequests(ctx, js, q); err != nil {
			return nil, err
		}
	}
	r.Applied, r.StreamLast = applied, last
	return r, nil
}

// answerRollups answers q from the live rollups of grain g, which must
// answer it exactly (Query.Grain).
func answerRollups(ctx context.Context, js jetstream.JetStream, q Query, g projection.Grain) (*Result, error) {
	// Summed as they are read: the cells are never all held at once.
	gr, cells := newGrouper(q), 0
	err := projection.EachRollup(ctx, js, projection.LiveNames(), projection.RollupFilter{Grain: g, Since: q.Since, Until: q.Until}, func(c *projection.Rollup) error {
		gr.add(&c.Cell, "", "", c.Totals)
		cells++
		return nil
	})
	if err != nil {
		return nil, err
	}
	r := gr.result(FromRollups)
	r.Grain, r.Cells = g, cells
	return r, nil
}

// scanRequests answers q from every request record.
func scanRequests(ctx context.Context, js jetstream.JetStream, q Query) (*Result, error) {
	g := newGrouper(q)
	err := projection.ReadAll(ctx, js, names.RequestsBucket, func(key string, value []byte) error {
		var rec projection.Request
		if err := json.Unmarshal(value, &rec); err != nil {
			return fmt.Errorf("report: request record %q is not readable: %w", key, err)
		}
		g.addRequest(&rec)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return g.result(FromRequests), nil
}

// requestCell is the rollup cell of a request record. A record written
// before the rollups has none until a rebuild: it counts in the hour it
// first started, under its provider and model, without labels.
func requestCell(r *projection.Request) projection.Cell {
	if c, ok := r.RollupCell(); ok {
		return c
	}
	return projection.Cell{Hour: r.FirstStartedAt.UTC().Truncate(time.Hour), Provider: r.Provider, Model: r.Model}
}

// addRequest counts r's contribution in its group (none before its first
// accepted event).
func (g *grouper) addRequest(r *projection.Request) {
	if r.Exists() {
		c := requestCell(r)
		g.add(&c, r.SessionID, r.RequestID, r.Contribution())
	}
}

// GroupRequests answers q from request records, as --by request does.
func GroupRequests(rs []projection.Request, q Query) *Result {
	g := newGrouper(q)
	for i := range rs {
		g.addRequest(&rs[i])
	}
	return g.result(FromRequests)
}
