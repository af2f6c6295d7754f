package replay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/pricing"
	"github.com/agentledger/ledger/internal/projection"
)

// ErrSwitching means a rebuild was switching the live ledger over while
// Verify read it, so the live records are a mix of two projections; run
// Verify again once the switch is done.
var ErrSwitching = errors.New("replay: a rebuild is switching the live ledger over")

// ErrIncomplete means the stream no longer holds every event the live
// ledger was projected from (the stream's MaxAge or a purge removed its
// start), so a recomputation cannot reproduce the ledger.
var ErrIncomplete = errors.New("replay: the stream no longer holds every event")

// Record kinds in a Diff.
const (
	KindSession   = "session"
	KindRequest   = "request"
	KindRollup    = "rollup"    // ID: the key in ledger_rollups
	KindRejection = "rejection" // ID: the original stream sequence
)

// FieldRecord is the Diff field of a record that exists on one side only.
const FieldRecord = "(record)"

// MemoryLimit is the soft memory limit of the Go runtime that verify runs
// under: its working set is bounded (see the package comment), and the
// limit keeps the garbage collector from letting the heap double it.
const MemoryLimit = 160 << 20

// Diff is one field of one record on which the live ledger and the
// recomputation disagree.
type Diff struct {
	Kind       string `json:"kind"` // KindSession, KindRequest or KindRejection
	ID         string `json:"id"`
	Field      string `json:"field"` // the contract's JSON name, dotted for usage and billed
	Live       string `json:"live"`
	Recomputed string `json:"recomputed"`
	// Delta is live minus recomputed for numeric fields (for the money
	// fields, whose Live and Recomputed are in US dollars, in nano-USD).
	Delta *int64 `json:"delta,omitempty"`
	// Seq is the stream sequence both sides were compared at.
	Seq uint64 `json:"seq"`
}

// Drift is the outcome of Verify.
type Drift struct {
	// Checkpoint is the live checkpoint when Verify started. Records the
	// live aggregator had not rewritten since are compared with the
	// recomputation at this sequence; records it wrote later are compared at
	// the sequence of the batch that wrote them (their own watermark).
	Checkpoint        uint64 `json:"checkpoint"`
	SessionsChecked   int    `json:"sessions_checked"`
	RequestsChecked   int    `json:"requests_checked"`
	RejectionsChecked int    `json:"rejections_checked"`
	SessionsDiffer    int    `json:"sessions_differ"`
	// RollupsChecked and RollupsDiffer count the cells of
	// ledger_rollups compared and found different (each cell's totals
	// against the sum of its recomputed requests).
	RollupsChecked   int `json:"rollups_checked"`
	RollupsDiffer    int `json:"rollups_differ"`
	RequestsDiffer   int `json:"requests_differ"`
	RejectionsDiffer int `json:"rejections_differ"`
	// UsageDelta and BilledDelta sum live minus recomputed over the
	// sessions; the token deltas are input plus output tokens (the cache
	// counts are parts of the input).
	UsageDelta       events.Usage `json:"usage_delta"`
	BilledDelta      events.Usage `json:"billed_delta"`
	UsageTokenDelta  int64        `json:"usage_token_delta"`
	BilledTokenDelta int64        `json:"billed_token_delta"`
	// UsageCostDelta and BilledCostDelta are the drift in money: live
	// minus recomputed, in nano-USD, summed over the sessions;
	// UnpricedTokenDelta the drift in billed tokens without a price. A
	// corrected price in the catalog shows here until a rebuild.
	UsageCostDelta     pricing.Money `json:"usage_cost_delta"`
	BilledCostDelta    pricing.Money `json:"billed_cost_delta"`
	UnpricedTokenDelta int64         `json:"unpriced_billed_token_delta"`
	// LedgerPrices is the catalog version the live ledger records,
	// Prices the one Verify recomputed with (the current catalog of
	// ledger_prices).
	LedgerPrices string `json:"ledger_prices,omitempty"`
	Prices       string `json:"prices,omitempty"`
	// PricesNote says what the aggregator does with the current catalog
	// when the ledger prices with another (ExplainPrices): adopts it, or
	// keeps its version until a rebuild re-prices (the drift in money
	// above); and whether this build's default catalog would make a new
	// current version (DefaultPricesNote).
	PricesNote        string `json:"prices_note,omitempty"`
	DefaultPricesNote string `json:"default_prices_note,omitempty"`
	// DiffCount counts every differing field; Diffs holds the first of
	// them (Options.MaxDiffs), sorted by kind (sessions, requests,
	// rejections), ID (rejections by sequence) and field.
	DiffCount int    `json:"difference_count"`
	Diffs     []Diff `json:"differences"`
}

// Identical reports whether no record differs.
func (d *Drift) Identical() bool {
	return d.SessionsDiffer == 0 && d.RequestsDiffer == 0 && d.RejectionsDiffer == 0 && d.RollupsDiffer == 0
}

// limits bound what verify holds in memory; the defaults keep it well
// under 256 MiB. Tests lower them to exercise the scratch buckets.
type limits struct {
	batch    int // stream messages replayed per batch
	open     int // requests in progress held in memory
	sessions int // sessions held in memory
	late     int // live sessions newer than the checkpoint
	drift    int // request IDs the live ledger cannot vouch for, in memory
	window   int // live request records read ahead
}

var defaultLimits = limits{batch: 8192, open: 20_000, sessions: 200_000, late: 100_000, drift: 100_000, window: 32_768}

// windowAhead is how far (in stream sequences) past the replay the window
// of live request records reads: beyond an aggregator batch.
const windowAhead = 32_768

// finishedBloomBits sizes the filter of finished requests (16 MiB): about
// one false positive in a million at 3 million requests, two in a
// thousand at 10 million; a false positive costs a lookup, never
// correctness.
const finishedBloomBits = 128 << 20

func (o Options) limits() limits {
	l := defaultLimits
	if o.bounds != (limits{}) {
		l = o.bounds
	}
	return l
}

// verifier is one run of Verify.
type verifier struct {
	js     jetstream.JetStream
	nc     *nats.Conn
	o      Options
	lim    limits
	apply  projection.ApplyFunc
	p      uint64 // the live checkpoint read at the start
	first  uint64 // the stream's first sequence the replay starts at (1 unless a loss was accepted)
	target uint64 // the replay goes this far: p, or the newest late session
	c      *diffs
	rej    *rejections
	sess   *sessionStore
	rols   *sessionStore // the rollup cells
	// grains are the rollup grains the live ledger writes: every grain
	// when its checkpoint says they are complete, else GrainHour.
	grains []projection.Grain
	// cellKeys are the keys of the requests' cells (addToCell).
	cellKeys projection.CellKeys
	open     *openSet
	drift    *driftSet
	window   *liveWindow
	// finished holds every request the replay finished: one it never
	// finished is certainly new when met.
	finished *bloom
	// liveFound counts the requests whose live record the replay read and
	// found (a value or a delete marker).
	liveFound uint64
	scratch   *scratch
	buf       []byte
	inPrev    map[string]bool // reused by firsts
	at        map[string]int  // reused by candidates
}

// Verify recomputes the ledger from the stream under the current code
// (or o.Apply) and compares it with the live ledger_requests,
// ledger_sessions and LEDGER_REJECTED while the live aggregator keeps
// running. Its memory is bounded whatever the ledger's size: it replays
// the stream once, holding only the requests in progress, and compares
// each request with its live record as soon as the request's last event
// is replayed; see the package comment for why each comparison is exact.
// It writes nothing to the ledger; what does not fit its bounds goes to
// scratch buckets that it deletes.
func Verify(ctx context.Context, js jetstream.JetStream, o Options) (*Drift, error) {
	if err := checkNoSwitch(ctx, js); err != nil {
		return nil, err
	}
	p, err := projection.ReadCheckpoint(ctx, js)
	if err != nil {
		return nil, err
	}
	stream, info, err := openStream(ctx, js)
	if err != nil {
		return nil, err
	}
	if p > info.State.LastSeq {
		return nil, fmt.Errorf("%w: the live checkpoint is %d but %s ends at %d",
			projection.ErrInvariant, p, names.AttemptsStream, info.State.LastSeq)
	}
	first, err := replayFrom(ctx, js, p, info)
	if err != nil {
		return nil, err
	}
	if err := allowDirect(ctx, js, info); err != nil {
		return nil, err
	}
	apply, prices, err := o.pricedApply(ctx, js, false)
	if err != nil {
		return nil, err
	}
	ledgerPrices, err := projection.LedgerPrices(ctx, js)
	if err != nil {
		return nil, err
	}
	d := &Drift{Checkpoint: p, Prices: prices, LedgerPrices: ledgerPrices}
	if o.Apply == nil {
		if d.PricesNote, d.DefaultPricesNote, err = ExplainPrices(ctx, js, o.Catalog); err != nil {
			return nil, err
		}
	}
	slow := watchSlowConsumer(js.Conn())
	defer slow.stop()
	v := &verifier{js: js, nc: js.Conn(), o: o, lim: o.limits(), apply: apply, p: p, first: first,
		c: &diffs{d: d, limit: o.MaxDiffs}, scratch: newScratch(js)}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		_ = v.scratch.close(cctx)
		cancel()
	}()
	err = v.run(ctx, stream)
	if serr := slow.err(); serr != nil {
		// Whatever run made of it, a reply was dropped on the way: the
		// comparison cannot be trusted, in either direction.
		return nil, serr
	}
	if err != nil {
		return nil, err
	}
	if err := checkNoSwitch(ctx, js); err != nil {
		return nil, err
	}
	d.UsageTokenDelta = d.UsageDelta.InputTokens + d.UsageDelta.OutputTokens
	d.BilledTokenDelta = d.BilledDelta.InputTokens + d.BilledDelta.OutputTokens
	d.Diffs = v.c.sorted()
	return d, nil
}

// run reads the live sessions, replays the stream comparing requests and
// rejections as it goes, then compares the sessions and looks for live
// requests the replay did not produce.
func (v *verifier) run(ctx context.Context, stream jetstream.Stream) error {
	v.sess = newSessionStore(v.p, v.lim, v.scratch)
	target, err := v.sess.readLive(ctx, v)
	if err != nil {
		return err
	}
	v.rols = newRollupStore(v.p, v.lim, v.scratch)
	rolTarget, err := v.rols.readLive(ctx, v)
	if err != nil {
		return err
	}
	// Read after the live cells: a ledger gets its coarser grains only
	// from its first event or a switch (refused while verify runs), and
	// says so in its checkpoint before it writes any.
	all, err := projection.LedgerRollupGrains(ctx, v.js)
	if err != nil {
		return err
	}
	v.grains = projection.Grains[:1]
	if all {
		v.grains = projection.Grains
	}
	v.target = max(target, rolTarget)
	target = v.target
	info, err := stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("replay: reading %s: %w", names.AttemptsStream, err)
	}
	if target > info.State.LastSeq {
		return fmt.Errorf("%w: the live ledger has applied stream sequence %d but %s ends at %d",
			projection.ErrInvariant, target, names.AttemptsStream, info.State.LastSeq)
	}
	rej, stopRej, err := readRejections(ctx, v.js, v.c, v.p)
	if err != nil {
		return err
	}
	defer stopRej()
	v.rej = rej
	v.open = newOpenSet(v)
	v.drift = newDriftSet(v.lim.drift, v.scratch)
	v.finished = newBloomBits(finishedBloomBits)
	v.window = openWindow(ctx, v.js, v.lim.window, windowAhead)
	defer v.window.stop()
	if err := v.replay(ctx, stream); err != nil {
		return err
	}
	if err := v.rej.finish(); err != nil {
		return err
	}
	if err := v.sess.compareAll(ctx, v.c); err != nil {
		return err
	}
	if err := v.rols.compareAll(ctx, v.c); err != nil {
		return err
	}
	return v.liveOnlyRequests(ctx)
}

// replayFrom returns the sequence the replay starts at: 1, or the
// stream's first one when the ledger was rebuilt without the events
// before it (projection.ReadLoss covers them all). A stream that lost
// events the ledger holds cannot reproduce it.
func replayFrom(ctx context.Context, js jetstream.JetStream, p uint64, info *jetstream.StreamInfo) (uint64, error) {
	first := info.State.FirstSeq
	if p == 0 || first <= 1 {
		return 1, nil
	}
	loss, err := projection.ReadLoss(ctx, js)
	if err != nil {
		return 0, err
	}
	if projection.LossCovers(loss, first-1) {
		return first, nil
	}
	return 0, fmt.Errorf("%w: %s starts at sequence %d, so events 1 to %d cannot be replayed (and no `aggregator rebuild --accept-loss` recorded their loss)",
		ErrIncomplete, names.AttemptsStream, first, first-1)
}

// checkNoSwitch fails with ErrSwitching while a rebuild's switch record
// exists.
func checkNoSwitch(ctx context.Context, js jetstream.JetStream) error {
	switching, err := projection.Switching(ctx, js)
	if err != nil {
		return err
	}
	if switching {
		return fmt.Errorf("%w; run verify again when it is done", ErrSwitching)
	}
	return nil
}

// allowDirect turns on direct gets on LEDGER_ATTEMPTS when an older
// version created it without them: verify reads events by subject with
// batched direct gets. It changes nothing else.
func allowDirect(ctx context.Context, js jetstream.JetStream, info *jetstream.StreamInfo) error {
	if info.Config.AllowDirect {
		return nil
	}
	cfg := info.Config
	cfg.AllowDirect = true
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("replay: allowing direct gets on %s: %w", names.AttemptsStream, err)
	}
	return nil
}
