package projection

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/testkit"
)

// pauser freezes one process of the randomized test (an aggregator or a
// rebuild) at random seam calls for random spans, as a GC pause, SIGSTOP
// or a partition would: while it is frozen every seam call of the process
// (batch points, switch points and renewals alike) blocks and its clock
// stands still, so on resuming it believes no time has passed. Its
// choices come from its own seeded source. The spans are the pauses being
// simulated, not waits for a condition: whatever they are, the ledger
// must end right.
type pauser struct {
	mu      sync.Mutex
	rng     *rand.Rand
	left    int // pauses still to make
	odds    int // one seam call in odds freezes
	longest time.Duration
	thaw    chan struct{}  // non-nil while frozen; closed on thawing
	clock   *testkit.Clock // the process's: real time, frozen with it
	quit    chan struct{}  // closed by stop: thaw, and no more pauses
}

func newPauser(seed uint64, pauses, odds int, longest time.Duration) *pauser {
	return &pauser{rng: rand.New(rand.NewPCG(seed, 7)), left: pauses, odds: odds, longest: longest, quit: make(chan struct{}), clock: testkit.NewRealClock()}
}

func (p *pauser) fault(FaultPoint) error {
	p.mu.Lock()
	if thaw := p.thaw; thaw != nil {
		p.mu.Unlock()
		<-thaw
		return nil
	}
	select {
	case <-p.quit:
		p.mu.Unlock()
		return nil
	default:
	}
	if p.left == 0 || p.rng.IntN(p.odds) != 0 {
		p.mu.Unlock()
		return nil
	}
	p.left--
	span := time.Duration(p.rng.Int64N(int64(p.longest)))
	thaw := make(chan struct{})
	p.thaw = thaw
	p.clock.Freeze()
	p.mu.Unlock()
	t := time.NewTimer(span)
	select {
	case <-t.C:
	case <-p.quit:
	}
	t.Stop()
	p.mu.Lock()
	p.clock.Thaw()
	p.thaw = nil
	close(thaw)
	p.mu.Unlock()
	return nil
}

func (p *pauser) stop() {
	select {
	case <-p.quit:
	default:
		close(p.quit)
	}
}

// chaosConfig sizes randomRebuilds.
type chaosConfig struct {
	Seed     uint64
	Rebuilds int // rebuilds, each run until one of its runs succeeds
	Requests int
}

// randomRebuilds is the randomized rebuild test: a ledger projected by
// buggy code, two live aggregators (holder and standby) and cfg.Rebuilds
// rebuilds, each frozen and resumed at random points, while a publisher
// publishes the rest of the stream; each rebuild is started at a random
// point of the publishing and run again until one of its runs succeeds.
// At the end the live ledger equals the model of every event, and verify
// (given by the caller: package replay imports this one) says identical.
func randomRebuilds(t *testing.T, cfg chaosConfig, verify func(context.Context, jetstream.JetStream) error) {
	t.Logf("seed %d (LEDGER_CHAOS_SEED=%d reruns it)", cfg.Seed, cfg.Seed)
	rng := rand.New(rand.NewPCG(cfg.Seed, 15))
	ws := wireStored(genWorkload(t, rng, 2+rng.IntN(6), cfg.Requests))
	first := len(ws) / 4
	e := newEnv(t)
	projectBuggy(t, e, ws[:first]) // the bug shows if a request has two events there

	// The TTL of the other tests: a loaded 2-core machine under -race renews
	// it in time.
	const ttl = time.Second
	longest := 3 * ttl / 2
	var pausers []*pauser
	pause := func() *pauser {
		p := newPauser(rng.Uint64(), 1+rng.IntN(2), 20+rng.IntN(60), longest)
		pausers = append(pausers, p)
		return p
	}
	var lives []*running
	for _, id := range []string{"live-a", "live-b"} {
		p := pause()
		lives = append(lives, e.start(Config{InstanceID: id, LeaseTTL: ttl, BatchSize: 3 + rng.IntN(20), Faults: p.fault, Now: p.clock.Now}))
	}

	// Rebuild i starts once chunk starts[i] is published.
	chunks := (len(ws) - first + 4) / 5
	starts := make([]int, cfg.Rebuilds)
	begin := make([]chan struct{}, cfg.Rebuilds)
	for i := range starts {
		starts[i], begin[i] = rng.IntN(chunks), make(chan struct{})
	}
	var published sync.WaitGroup
	published.Add(1)
	go func() {
		defer published.Done()
		for c, i := 0, first; i < len(ws); c, i = c+1, i+5 {
			for r, at := range starts {
				if at == c {
					close(begin[r])
				}
			}
			e.publish(ws[i:min(i+5, len(ws))]...)
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, cfg.Rebuilds)
	for r := range cfg.Rebuilds {
		p := pause()
		batch := 3 + rng.IntN(20)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-begin[r]
			for runs := 1; ; runs++ {
				err := Rebuild(ctx, RebuildConfig{JS: e.js, LeaseTTL: ttl, BatchSize: batch, Faults: p.fault, Now: p.clock.Now})
				if err == nil || ctx.Err() != nil {
					errs[r] = err
					return
				}
				t.Logf("rebuild %d, run %d: %v", r, runs, err)
			}
		}()
	}
	wg.Wait()
	published.Wait()
	for _, p := range pausers {
		p.stop()
	}
	for r, err := range errs {
		require.NoError(t, err, "rebuild %d never succeeded", r)
	}

	require.Eventually(t, func() bool {
		switching, err := Switching(context.Background(), e.js)
		return err == nil && !switching && (lives[0].agg.Leading() || lives[1].agg.Leading())
	}, 30*time.Second, 5*time.Millisecond, "no live aggregator leads after the rebuilds")
	for _, l := range lives {
		select {
		case err := <-l.done:
			l.done <- err
			t.Fatalf("a live aggregator stopped: %v", err)
		default:
		}
	}
	e.waitCheckpoint(e.lastSeq())
	e.requireLedger(buildModel(ws))
	require.NoError(t, verify(context.Background(), e.js))
	sets, err := scratchSets(context.Background(), e.js)
	require.NoError(t, err)
	require.Empty(t, sets, "every scratch set is deleted")
}
