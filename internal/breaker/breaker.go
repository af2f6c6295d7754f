package breaker

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// Defaults applied to the zero fields of a Config.
const (
	DefaultFailureThreshold = 5
	DefaultCooldown         = 30 * time.Second
)

// State is the state of a circuit.
type State int

// The states of a circuit; see the package documentation.
const (
	Closed State = iota
	Open
	HalfOpen
)

// String returns "closed", "open" or "half_open", the spelling of the
// fleet's records (docs/fleet.md).
func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half_open"
	default:
		return "State(" + strconv.Itoa(int(s)) + ")"
	}
}

// Result is the outcome of an admitted call, as reported to Done.
type Result int

// The outcomes of a call. Any other value is treated as Ignore.
const (
	// Success: the upstream answered; it resets the failure count and
	// closes a half-open circuit.
	Success Result = iota
	// Failure: the upstream is unhealthy (server error, overload, timeout,
	// transport failure); it counts towards opening the circuit and reopens
	// a half-open one.
	Failure
	// Ignore: the outcome says nothing about the upstream's health (client
	// error, caller cancellation); it changes no count. On a probe it frees
	// the probe slot.
	Ignore
)

// String returns "success", "failure" or "ignore".
func (r Result) String() string {
	switch r {
	case Success:
		return "success"
	case Failure:
		return "failure"
	case Ignore:
		return "ignore"
	default:
		return "Result(" + strconv.Itoa(int(r)) + ")"
	}
}

// Config configures a Breaker (or every Breaker of a Group). The zero value
// is valid and selects the defaults.
type Config struct {
	// FailureThreshold is the number of consecutive Failure results that
	// opens the circuit. Zero selects DefaultFailureThreshold; negative is
	// invalid.
	FailureThreshold int
	// Cooldown is how long the circuit stays open before a probe is
	// admitted, and how long a probe may stay unreported before another
	// one is admitted. Zero selects DefaultCooldown; negative is invalid.
	Cooldown time.Duration
	// Now is the clock; nil selects time.Now.
	Now func() time.Time
	// OnStateChange, when set, is called after every state change with the
	// breaker's key. It is called outside the breaker's lock, so it may
	// call the breaker's methods, and calls for one breaker are delivered
	// one at a time in the order of the transitions, possibly from the
	// goroutine of a later transition. It must be quick: it runs on the
	// caller's path.
	OnStateChange func(key string, from, to State)
}

// normalize validates c and returns it with the defaults applied.
func (c Config) normalize() (Config, error) {
	var errs []error
	if c.FailureThreshold < 0 {
		errs = append(errs, fmt.Errorf("%w: FailureThreshold is %d, must not be negative (0 selects the default %d)",
			ErrInvalidConfig, c.FailureThreshold, DefaultFailureThreshold))
	}
	if c.Cooldown < 0 {
		errs = append(errs, fmt.Errorf("%w: Cooldown is %v, must not be negative (0 selects the default %v)",
			ErrInvalidConfig, c.Cooldown, DefaultCooldown))
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	if c.FailureThreshold == 0 {
		c.FailureThreshold = DefaultFailureThreshold
	}
	if c.Cooldown == 0 {
		c.Cooldown = DefaultCooldown
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}

// Permit is the admission of one call, returned by Allow and handed back
// to Done with the call's outcome. The zero Permit is never current, so
// Done ignores it.
type Permit struct {
	generation uint64
	probe      bool
}

// Probe reports whether the permit admits the half-open probe.
func (p Permit) Probe() bool { return p.probe }

// Breaker is the circuit breaker of one upstream. It is safe for
// concurrent use; create it with New (or get it from a Group).
type Breaker struct {
	key       string
	threshold int
	cooldown  time.Duration
	now       func() time.Time
	onChange  func(key string, from, to State)

	mu         sync.Mutex
	state      State
	generation uint64    // advances on every state change and probe admission
	failures   int       // consecutive failures while Closed
	openedAt   time.Time // when the circuit last opened, valid while Open
	probing    bool      // a probe is in flight, only while HalfOpen
	probeSince time.Time // when the probe in flight was admitted

	// State-change notifications waiting for delivery, guarded by mu.
	pending    []transition
	spare      []transition
	delivering bool
}

type transition struct{ from, to State }

// New returns a closed breaker for the upstream named key. It returns an
// error wrapping ErrInvalidConfig when cfg is invalid.
func New(key string, cfg Config) (*Breaker, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	return newBreaker(key, cfg), nil
}

// newBreaker builds a breaker from a normalized config.
func newBreaker(key string, cfg Config) *Breaker {
	return &Breaker{
		key:        key,
		threshold:  cfg.FailureThreshold,
		cooldown:   cfg.Cooldown,
		now:        cfg.Now,
		onChange:   cfg.OnStateChange,
		state:      Closed,
		generation: 1, // so that the zero Permit is stale
	}
}

// Key returns the name the breaker was created with.
func (b *Breaker) Key() string { return b.key }

// Allow asks to make one call. On admission it returns a Permit that must
// be reported to Done exactly once. On rejection the error is an
// *OpenError, which wraps ErrCircuitOpen.
func (b *Breaker) Allow() (Permit, error) {
	b.mu.Lock()
	if b.state == Closed {
		p := Permit{generation: b.generation}
		b.mu.Unlock()
		return p, nil
	}
	now := b.now()
	changed := b.advanceLocked(now)
	var p Permit
	err := b.rejectionLocked(now)
	if err == nil {
		// No probe in flight, or the one in flight has been unreported for
		// a whole cooldown: admit a new probe in a new generation, so that
		// a replaced probe's late result is dropped.
		b.generation++
		b.probing = true
		b.probeSince = now
		p = Permit{generation: b.generation, probe: true}
	}
	b.mu.Unlock()
	if changed {
		b.deliver()
	}
	return p, err
}

// Done reports the outcome of the call admitted by p. Results for permits
// of an earlier generation (the circuit changed state since, or the probe
// was replaced) are dropped, as are second reports of a probe.
func (b *Breaker) Done(p Permit, r Result) {
	b.mu.Lock()
	if p.generation != b.generation {
		b.mu.Unlock()
		return
	}
	changed := false
	switch b.state {
	case Closed:
		switch r {
		case Success:
			b.failures = 0
		case Failure:
			b.failures++
			if b.failures >= b.threshold {
				b.openLocked(b.now())
				changed = true
			}
		}
	case HalfOpen:
		// Only probes are issued in a half-open generation, so p is the
		// probe in flight unless its slot was already freed.
		if !b.probing {
			break
		}
		switch r {
		case Success:
			b.setStateLocked(Closed)
			changed = true
		case Failure:
			b.openLocked(b.now())
			changed = true
		default:
			// Free the slot; with probing false this permit is no longer
			// current, and the next probe starts a new generation.
			b.probing = false
		}
	}
	b.mu.Unlock()
	if changed {
		b.deliver()
	}
}

// State returns the breaker's current state. An open circuit whose
// cooldown has passed is reported (and becomes) HalfOpen.
func (b *Breaker) State() State {
	b.mu.Lock()
	changed := false
	if b.state == Open {
		changed = b.advanceLocked(b.now())
	}
	s := b.state
	b.mu.Unlock()
	if changed {
		b.deliver()
	}
	return s
}

// advanceLocked moves an open circuit whose cooldown has passed to
// HalfOpen and reports whether it did.
func (b *Breaker) advanceLocked(now time.Time) bool {
	if b.state != Open || now.Before(b.openedAt.Add(b.cooldown)) {
		return false
	}
	b.setStateLocked(HalfOpen)
	return true
}

func (b *Breaker) openLocked(now time.Time) {
	b.setStateLocked(Open)
	b.openedAt = now
}

// setStateLocked changes the state, starts a new generation with clean
// counts and queues the notification.
func (b *Breaker) setStateLocked(to State) {
	from := b.state
	b.state = to
	b.generation++
	b.failures = 0
	b.probing = false
	if b.onChange != nil {
		b.pending = append(b.pending, transition{from: from, to: to})
	}
}

// deliver calls OnStateChange for the queued transitions, outside the
// lock. Only one goroutine delivers at a time; one that finds another
// delivering leaves its transitions to it, which keeps them in order.
func (b *Breaker) deliver() {
	b.mu.Lock()
	if b.delivering {
		b.mu.Unlock()
		return
	}
	b.delivering = true
	for len(b.pending) > 0 {
		batch := b.pending
		b.pending = b.spare[:0]
		b.mu.Unlock()
		b.call(batch)
		b.mu.Lock()
		b.spare = batch[:0]
	}
	b.delivering = false
	b.mu.Unlock()
}

// call runs the callback for batch; if the callback panics, it gives up
// the delivering role so that later transitions are still delivered.
func (b *Breaker) call(batch []transition) {
	ok := false
	defer func() {
		if !ok {
			b.mu.Lock()
			b.delivering = false
			b.mu.Unlock()
		}
	}()
	for _, t := range batch {
		b.onChange(b.key, t.from, t.to)
	}
	ok = true
}

// Check returns the rejection Allow would return now when the breaker
// rejects for sure (open within its cooldown, or half-open with a probe in
// flight for less than a cooldown), and nil otherwise. It admits nothing,
// so a caller can check before waiting for something else (capacity)
// that a rejected attempt would not need.
func (b *Breaker) Check() error {
	b.mu.Lock()
	if b.state == Closed {
		b.mu.Unlock()
		return nil
	}
	now := b.now()
	changed := b.advanceLocked(now)
	err := b.rejectionLocked(now)
	b.mu.Unlock()
	if changed {
		b.deliver()
	}
	return err
}

// rejectionLocked is the rejection of a call at now by a circuit that is
// not closed, or nil when it would admit a probe.
func (b *Breaker) rejectionLocked(now time.Time) error {
	switch {
	case b.state == Open:
		return &OpenError{Key: b.key, Until: b.openedAt.Add(b.cooldown), State: Open}
	case b.probing && now.Before(b.probeSince.Add(b.cooldown)):
		return &OpenError{Key: b.key, State: HalfOpen}
	}
	return nil
}
