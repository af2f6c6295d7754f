package projection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/pricebook"
	"github.com/agentledger/ledger/internal/pricing"
)

// ErrRulesTooOld means the ledger was written by newer projection rules
// than this build applies (RulesVersion): the aggregator refuses to write
// it.
var ErrRulesTooOld = errors.New("projection: the ledger's rules are newer than this build's")

// headerTerm names the term on a fence marker.
const headerTerm = "Ledger-Term"

// term is one lease term of a writer: the lease, and the fences it raised
// when it began. Every write of the term is conditional on the fences
// (see the package comment): a record write expects the last sequence of
// its bucket's stream to be the one the term knows, a rejection expects
// the rejection stream's, and the checkpoint is compare-and-set on the
// revision the term wrote. Whoever writes after a newer term began fails.
// One term has one writer at a time.
type term struct {
	lease *lease
	id    uint64 // the lease revision the term began with
	rules int    // the writer's RulesVersion
	// prices is the catalog version the ledger prices with (recorded in
	// its checkpoint), catalog that catalog: the term prices every
	// attempt with it and with nothing else.
	prices  string
	catalog *pricing.Catalog
	// priced is the latest started_at of the attempts the ledger has
	// priced, which a catalog change is judged against; written with
	// every checkpoint.
	priced startedMark
	// considered is the last catalog version the term judged (consider).
	considered string
	// allGrains: the term writes every grain of the rollups
	// (checkpoint.AllGrains), not only GrainHour.
	allGrains bool
	cp        checkpoint
	cpRev     uint64
	// The last sequence of each stream the term writes, as the term knows
	// it: its own writes are the only ones since it began.
	reqLast, sesLast, rolLast, rejLast uint64
	// rejFloor is the original sequence of the last recorded rejection
	// when the term began.
	rejFloor uint64
}

// beginTerm raises the fences of a new term of the lease holder l: it
// rewrites the checkpoint with the term (so an older term's checkpoint
// write fails), writes a fence marker into each record bucket (so an older
// term's record writes fail) and reads the rejection stream's last
// sequence. It refuses a ledger whose rules are newer than rules.
func beginTerm(ctx context.Context, res *resources, l *lease, id uint64, rules int, log *slog.Logger) (*term, error) {
	t := &term{lease: l, id: id, rules: rules}
	cp, rev, err := readCheckpoint(ctx, res.state)
	if err != nil {
		return nil, err
	}
	if r := cp.ledgerRules(); r > rules {
		return nil, fmt.Errorf("%w: %s was written by rules version %d and this aggregator applies version %d; upgrade this aggregator (it will not write)",
			ErrRulesTooOld, res.names.Requests, r, rules)
	}
	if cp.Rules < rules && (cp.Seq > 0 || cp.Switch != nil) {
		log.Warn("aggregator: the ledger moves to newer projection rules; records written before keep the old ones until a rebuild",
			"ledger_rules", cp.Rules, "rules", rules)
	}
	t.priced.set(cp.PricedThrough, cp.Seq)
	if err := t.choosePrices(ctx, res, cp, log); err != nil {
		return nil, err
	}
	// A ledger gets every grain when it is projected with them from its
	// first event; one that already holds events keeps what it had (only
	// GrainHour, or none without rollups) until a rebuild.
	fresh := cp.Seq == 0 && cp.Switch == nil
	t.allGrains = res.rollups != nil && (cp.AllGrains || fresh)
	if res.rollups != nil && !t.allGrains {
		log.Warn("aggregator: the ledger was projected before its day and model-hour rollups existed; only the hourly ones are written, and reports read those (slower over long ranges), until `aggregator rebuild` projects every grain from the first event")
	}
	cp.Term, cp.Rules, cp.Prices, cp.PricedThrough, cp.AllGrains = t.id, max(cp.Rules, rules), t.prices, t.priced.through(), t.allGrains
	if t.cpRev, err = res.stateW.putOne(ctx, names.CheckpointKey, mustJSON(cp), rev); err != nil {
		return nil, fmt.Errorf("projection: beginning term %d: %w", t.id, err)
	}
	t.cp = cp
	if t.reqLast, err = res.requests.fence(ctx, t.id); err != nil {
		return nil, err
	}
	if t.sesLast, err = res.sessions.fence(ctx, t.id); err != nil {
		return nil, err
	}
	if res.rollups != nil {
		if t.rolLast, err = res.rollups.fence(ctx, t.id); err != nil {
			return nil, err
		}
	}
	if t.rejLast, t.rejFloor, err = lastRejection(ctx, res.rejected, res.names.RejectedPrefix+">"); err != nil {
		return nil, err
	}
	return t, nil
}

// choosePrices sets the catalog version the term prices with: the one
// the ledger records in cp, or, for a ledger that records none (an empty
// one, or one written before pricing), the current catalog of
// ledger_prices, which the term then records. First this build's default
// catalog, merged with the current user's file, is made current when it
// is a new version (pricebook.Book.AdoptDefault). A newer current catalog
// is adopted when the term begins, or later between two batches (adopt),
// only if it prices every attempt the ledger has applied as the recorded
// one does (pricebook.ForwardOnly against the latest started_at the
// ledger priced: it adds prices from after it); a change of a past price
// is never used mid-ledger: a rebuild re-prices the history with it and
// its switch records it. The catalog itself is loaded by the batcher
// (loadCatalog), so that a rebuild's live term, which prices nothing,
// does not need it.
func (t *term) choosePrices(ctx context.Context, res *resources, cp checkpoint, log *slog.Logger) error {
	// This build's default catalog is a catalog change like a loaded
	// file: stored (resolved, so that any build can price with it), made
	// current, and judged below as one.
	current, changed, err := res.book.AdoptDefault(ctx, t.lease.now())
	if err != nil {
		return err
	}
	if changed {
		log.Info("aggregator: this build's default price catalog, merged with the current user's file if any, is a new catalog version: stored and made current",
			"current_catalog", current, "ledger_catalog", cp.Prices)
	}
	t.prices = cp.Prices
	switch {
	case t.prices == "":
		t.prices = current
		if cp.Seq > 0 {
			log.Warn("aggregator: the ledger was written before pricing; it is priced from now on, and records written before have no cost until `aggregator rebuild`",
				"catalog", current)
		}
	case t.prices != current:
		t.consider(ctx, res, current, log)
	}
	return nil
}

// consider makes the term price with catalog version v when v prices
// every attempt the ledger has applied as the term's catalog does
// (pricebook.ForwardOnly against t.priced); it reports whether it did.
// The caller loads the catalog (loadCatalog) before the next batch, and
// the term's next checkpoint records v with the first batch priced by it.
// It is called when the term begins and between batches, with no batch in
// flight (adopt).
func (t *term) consider(ctx context.Context, res *resources, v string, log *slog.Logger) bool {
	t.considered = v
	through := t.priced.through()
	if through.Equal(pricedUnknown) {
		log.Warn("aggregator: the current price catalog (a loaded file, or this build's default catalog) is not the ledger's, and the ledger's checkpoint does not say which attempts it has priced (it was written before priced_through was kept), so no change can be shown to leave them alike; the ledger keeps pricing with the version it records until `aggregator rebuild` re-prices its history with the current one",
			"ledger_catalog", t.prices, "current_catalog", v)
		return false
	}
	ok, err := forwardOnly(ctx, res, t.prices, v, through)
	if err != nil {
		log.Warn("aggregator: the current price catalog (a loaded file, or this build's default catalog) cannot be judged against the ledger's by this process; the ledger keeps the version it records",
			"ledger_catalog", t.prices, "current_catalog", v, "error", err)
		return false
	}
	if !ok {
		log.Warn("aggregator: the current price catalog (a loaded file, or this build's default catalog) changes the price of attempts the ledger has applied (a price rewritten or removed, or a price dated on or before the latest attempt priced); the ledger keeps pricing with the version it records until `aggregator rebuild` re-prices its history (`aggregator verify` shows the drift in money)",
			"ledger_catalog", t.prices, "current_catalog", v, "priced_through", through)
		return false
	}
	log.Info("aggregator: the ledger adopts the current price catalog: it only adds prices from after the latest attempt priced",
		"ledger_catalog", t.prices, "current_catalog", v, "priced_through", through)
	t.prices, t.catalog = v, nil
	return true
}

// LedgerPricedThrough returns the latest started_at of the attempts the
// live ledger has priced, the time a catalog change is judged against
// (pricebook.ForwardOnly); the far future when its checkpoint does not
// keep it (written before it was kept).
func LedgerPricedThrough(ctx context.Context, js jetstream.JetStream) (time.Time, error) {
	c, err := readLiveCheckpoint(ctx, js)
	var m startedMark
	m.set(c.PricedThrough, c.Seq)
	return m.through(), err
}

// PricedThroughUnknown reports whether through, from LedgerPricedThrough,
// stands for a ledger whose checkpoint does not keep it: no catalog
// change is judged forward-only against it until a rebuild.
func PricedThroughUnknown(through time.Time) bool { return !through.Before(pricedUnknown) }

// adopt is consider between two batches of a running term, for the
// version the watch of ledger_prices saw made current (none: "");
// nothing may be in flight. It reports whether the term now prices with
// another catalog, loaded.
func (t *term) adopt(ctx context.Context, res *resources, v string, log *slog.Logger) (bool, error) {
	if v == "" || v == t.prices || v == t.considered || !t.consider(ctx, res, v, log) {
		return false, nil
	}
	if err := t.loadCatalog(ctx, res); err != nil {
		return false, err
	}
	return true, nil
}

// pricedUnknown is the mark of a ledger whose checkpoint does not keep
// it (written before it was kept): it stands for every time, so that no
// catalog change is judged forward-only against that ledger until a
// rebuild's switch brings a mark.
var pricedUnknown = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)

// pricedNone is the mark of a ledger that has priced no attempt.
var pricedNone = time.Unix(1, 0).UTC()

// startedMark is the latest started_at of the attempts a ledger has
// priced, in Unix seconds rounded up: what a catalog change is judged
// against (pricebook.ForwardOnly). The term that prepares batches
// observes it (tracking), the one that commits them writes it with each
// checkpoint; it may run ahead of the checkpoint by the batch in
// preparation, which only makes the judgement stricter.
type startedMark struct{ s atomic.Int64 }

// set starts the mark from a checkpoint's: through, or for a ledger that
// has applied events (seq) without a mark, pricedUnknown.
func (m *startedMark) set(through time.Time, seq uint64) {
	switch {
	case !through.IsZero():
		m.s.Store(through.Unix())
	case seq > 0:
		m.s.Store(pricedUnknown.Unix())
	default:
		m.s.Store(pricedNone.Unix())
	}
}

// observe raises the mark to at (rounded up to the second).
func (m *startedMark) observe(at time.Time) {
	s := at.Unix()
	if at.Nanosecond() > 0 {
		s++
	}
	for {
		cur := m.s.Load()
		if s <= cur || m.s.CompareAndSwap(cur, s) {
			return
		}
	}
}

// through is the mark as a time (pricedNone when nothing was priced).
func (m *startedMark) through() time.Time {
	return time.Unix(max(m.s.Load(), pricedNone.Unix()), 0).UTC()
}

// tracking is apply that also raises the mark to each event's started_at.
func (m *startedMark) tracking(apply ApplyFunc) ApplyFunc {
	return func(r *Request, ev *events.Attempt) bool {
		m.observe(ev.StartedAt)
		return apply(r, ev)
	}
}

// forwardOnly reports whether the ledger priced with catalog version prev
// may go on with next (pricebook.ForwardOnly); an error when this process
// cannot load either.
func forwardOnly(ctx context.Context, res *resources, prev, next string, through time.Time) (bool, error) {
	p, err := res.book.Catalog(ctx, prev)
	if err != nil {
		return false, err
	}
	n, err := res.book.Catalog(ctx, next)
	if err != nil {
		return false, err
	}
	return pricebook.ForwardOnly(p, n, through), nil
}

// loadCatalog loads the catalog of the term's version. A version this
// process cannot rebuild (pricebook.ErrUnavailable: another build's
// default catalog) stops the term before it writes a record: the ledger
// is never priced with two catalogs.
func (t *term) loadCatalog(ctx context.Context, res *resources) error {
	if t.catalog != nil {
		return nil
	}
	cat, err := res.book.Catalog(ctx, t.prices)
	if err != nil {
		return fmt.Errorf("projection: %s is priced with catalog %s and this aggregator cannot price with it (it will not write): %w", res.names.Requests, t.prices, err)
	}
	t.catalog = cat
	return nil
}

// lastRejection returns the rejection stream's last sequence and the
// original stream sequence of the last recorded rejection (0 when none).
// Rejections are recorded in stream order, each once (see recordRejects),
// so everything at or below the floor is recorded and nothing above it is.
func lastRejection(ctx context.Context, rejected jetstream.Stream, subjects string) (last, floor uint64, err error) {
	name := rejected.CachedInfo().Config.Name
	info, err := rejected.Info(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("projection: reading %s: %w", name, err)
	}
	if info.State.Msgs == 0 {
		return info.State.LastSeq, 0, nil
	}
	// The last message there is (the one at LastSeq may have been deleted).
	m, err := rejected.GetLastMsgForSubject(ctx, subjects)
	if err != nil {
		return 0, 0, fmt.Errorf("projection: reading the last rejection of %s: %w", name, err)
	}
	floor, err = strconv.ParseUint(m.Header.Get(headerOriginalSeq), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("%w: the last rejection of %s (%d) has no readable %s header", ErrInvariant, name, m.Sequence, headerOriginalSeq)
	}
	return info.State.LastSeq, floor, nil
}

// valid returns an error when no write may be sent: the lease may have
// lapsed.
func (t *term) valid() error { return t.lease.valid() }

// hit calls the holder's fault seam (Config.Faults) at p.
func (t *term) hit(p FaultPoint) error { return seam(t.lease.fault).hit(p) }

// writeCheckpoint commits cp, compare-and-set on the revision this term
// last wrote.
func (t *term) writeCheckpoint(ctx context.Context, state *bucket, cp checkpoint) error {
	if err := t.valid(); err != nil {
		return err
	}
	cp.Term, cp.Rules, cp.Prices, cp.PricedThrough, cp.AllGrains = t.id, t.rules, t.prices, t.priced.through(), t.allGrains
	rev, err := state.putOne(ctx, names.CheckpointKey, mustJSON(cp), t.cpRev)
	if err != nil {
		return err
	}
	t.cp, t.cpRev = cp, rev
	return nil
}

// fence writes the fence marker of a term into the bucket and returns the
// stream sequence it got: from then on, a write that expects an earlier
// last sequence fails.
func (b *bucket) fence(ctx context.Context, term uint64) (uint64, error) {
	m := nats.NewMsg(b.prefix + names.FenceKey)
	m.Header.Set(kvOperationHeader, "DEL")
	m.Header.Set(headerTerm, strconv.FormatUint(term, 10))
	ack, err := b.js.PublishMsg(ctx, m)
	if err != nil {
		return 0, fmt.Errorf("projection: fencing %s for term %d: %w", b.kv.Bucket(), term, err)
	}
	return ack.Sequence, nil
}

// kvOperationHeader marks a KV delete or purge.
const kvOperationHeader = "KV-Operation"

// rejectPublishOpts are the conditions of a rejection's publish in term t.
func (t *term) rejectPublishOpts() []jetstream.PublishOpt {
	return []jetstream.PublishOpt{jetstream.WithExpectLastSequence(t.rejLast)}
}
