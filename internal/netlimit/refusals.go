package netlimit

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"
)

// Reasons of a refusal, as counted and logged.
const (
	// ReasonConnectionCap: the connection cap was reached; accepting
	// paused until a connection closed.
	ReasonConnectionCap = "connection_cap"
	// ReasonAcceptError: accepting a connection failed (EMFILE, ENFILE,
	// ...); retried after a backoff.
	ReasonAcceptError = "accept_error"
	// ReasonBodyBudget: the byte budget of bodies in flight was spent
	// (503 with retry-after).
	ReasonBodyBudget = "body_budget"
	// ReasonBodyTooLarge: a body over the per-request limit (413).
	ReasonBodyTooLarge = "body_too_large"
	// ReasonBodyTimeout: a body that did not arrive in time (408).
	ReasonBodyTimeout = "body_timeout"
	// ReasonClientCalls: a client's calls in flight at its cap (429).
	ReasonClientCalls = "client_calls"
)

// reasons are the reasons whose counters exist, at 0, from the start.
var reasons = []string{ReasonConnectionCap, ReasonAcceptError, ReasonBodyBudget, ReasonBodyTooLarge, ReasonBodyTimeout, ReasonClientCalls}

// DefaultLogInterval is the shortest time between two records of one
// reason.
const DefaultLogInterval = time.Second

// Refusals counts the refusals of a server by reason and logs them at
// WARN, at most once per Interval per reason: the record carries how many
// were refused since the previous one. Safe for concurrent use; the zero
// value is not usable, use NewRefusals.
type Refusals struct {
	log      *slog.Logger
	interval time.Duration
	now      func() time.Time

	mu   sync.Mutex
	by   map[string]*reasonState
	keys []string
}

type reasonState struct {
	total      uint64
	suppressed uint64 // since the last record
	last       time.Time
	logged     bool
}

// NewRefusals returns Refusals that log to log (nil: discarded) at most
// once per interval per reason (0: DefaultLogInterval), reading the time
// from now (nil: time.Now).
func NewRefusals(log *slog.Logger, interval time.Duration, now func() time.Time) *Refusals {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if interval <= 0 {
		interval = DefaultLogInterval
	}
	if now == nil {
		now = time.Now
	}
	r := &Refusals{log: log, interval: interval, now: now, by: make(map[string]*reasonState)}
	for _, k := range reasons {
		r.state(k)
	}
	return r
}

func (r *Refusals) state(reason string) *reasonState {
	s, ok := r.by[reason]
	if !ok {
		s = &reasonState{}
		r.by[reason] = s
		r.keys = append(r.keys, reason)
		sort.Strings(r.keys)
	}
	return s
}

// Refuse counts one refusal of reason and logs msg with attrs at WARN,
// unless a record of reason was written less than the interval ago. The
// record carries "refused": the refusals of reason since the previous
// record, this one included, and "total". attrs must hold no secret.
func (r *Refusals) Refuse(ctx context.Context, reason, msg string, attrs ...slog.Attr) {
	now := r.now()
	r.mu.Lock()
	s := r.state(reason)
	s.total++
	s.suppressed++
	if s.logged && now.Sub(s.last) < r.interval {
		r.mu.Unlock()
		return
	}
	n, total := s.suppressed, s.total
	s.suppressed, s.last, s.logged = 0, now, true
	r.mu.Unlock()
	attrs = append(attrs, slog.String("reason", reason), slog.Uint64("refused", n), slog.Uint64("total", total))
	r.log.LogAttrs(ctx, slog.LevelWarn, msg, attrs...)
}

// Counts returns the refusals so far by reason; every known reason is
// present, at 0 when none was refused.
func (r *Refusals) Counts() map[string]uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]uint64, len(r.by))
	for k, s := range r.by {
		out[k] = s.total
	}
	return out
}

// Reasons returns the reasons counted so far, sorted: the known ones and
// any other given to Refuse.
func (r *Refusals) Reasons() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.keys...)
}
