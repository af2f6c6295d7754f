package fleet

import (
	"encoding/json"
	"math"
	"time"

	"github.com/agentledger/ledger/internal/guard"
)

// recordVersion is the version of the records' layout; a reader ignores
// (as absent) a record of a later version it does not know.
const recordVersion = 1

// Breaker states as written.
const (
	stateClosed   = "closed"
	stateOpen     = "open"
	stateHalfOpen = "half_open"
)

// breakerRecord is the fleet's breaker of one upstream.
type breakerRecord struct {
	V int `json:"v"`
	// State is closed, open or half_open.
	State string `json:"state"`
	// Generation advances on every change of state and every probe
	// claimed; a report made in another generation is dropped.
	Generation uint64 `json:"generation"`
	// Failures counts consecutive retryable failures while closed.
	Failures int `json:"failures,omitempty"`
	// Until is when an open breaker admits a probe.
	Until time.Time `json:"until,omitzero"`
	// Probe is the process holding the probe while half_open, until
	// ProbeUntil (then another may claim it).
	Probe      string    `json:"probe,omitempty"`
	ProbeUntil time.Time `json:"probe_until,omitzero"`
	// By is the process that wrote the record, At when; Reason says why
	// the state is what it is.
	By     string    `json:"by"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason,omitempty"`
}

// limitsRecord holds the per-minute limits learned from the headers, and
// the requests limit inferred from 429s where none is learned.
type limitsRecord struct {
	V        int             `json:"v"`
	Limits   dimsOf[int64]   `json:"per_minute"`
	Inferred *guard.Inferred `json:"inferred,omitempty"`
	By       string          `json:"by"`
	At       time.Time       `json:"at"`
}

// holdRecord holds the upstream until Until, after a 429.
type holdRecord struct {
	V      int       `json:"v"`
	Until  time.Time `json:"until"`
	Reason string    `json:"reason,omitempty"`
	By     string    `json:"by"`
	At     time.Time `json:"at"`
}

// capacityRecord is the level of the fleet's token bucket of each limited
// dimension at At.
type capacityRecord struct {
	V      int             `json:"v"`
	Levels dimsOf[float64] `json:"levels"`
	// Est is the estimated cost of one attempt (a mean of the actual
	// costs of made attempts) of the last writer that knew one.
	Est dimsOf[float64] `json:"est"`
	At  time.Time       `json:"at"`
	By  string          `json:"by"`
}

// budgetRecord counts the first attempts and retries of the budget's
// sliding window, per slot (slot number: Unix time over the slot's
// length).
type budgetRecord struct {
	V      int          `json:"v"`
	SlotMS int64        `json:"slot_ms"`
	Slots  []budgetSlot `json:"slots"`
	By     string       `json:"by"`
	At     time.Time    `json:"at"`
}

type budgetSlot struct {
	Slot    int64 `json:"slot"`
	First   int64 `json:"first"`
	Retries int64 `json:"retries"`
}

// processRecord is a process's heartbeat.
type processRecord struct {
	V         int       `json:"v"`
	Process   string    `json:"process"`
	Host      string    `json:"host,omitempty"`
	PID       int       `json:"pid,omitempty"`
	Started   time.Time `json:"started"`
	Heartbeat time.Time `json:"heartbeat"`
}

// dimsOf is a value per rate-limit dimension, written as an object keyed
// by the dimension (requests, input_tokens, output_tokens, tokens);
// dimensions with the zero value are left out.
type dimsOf[T int64 | float64] [guard.NumDims]T

func (d dimsOf[T]) MarshalJSON() ([]byte, error) {
	m := make(map[string]T, guard.NumDims)
	for i, v := range d {
		if v != 0 {
			m[guard.Dim(i).Key()] = v
		}
	}
	return json.Marshal(m)
}

func (d *dimsOf[T]) UnmarshalJSON(b []byte) error {
	var m map[string]T
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*d = dimsOf[T]{}
	for i := range guard.NumDims {
		d[i] = m[i.Key()]
	}
	return nil
}

// decode reads a record written by any process. A record that does not
// decode, or breaks the layout's rules, is treated as absent: it is
// soft state, and the next write replaces it.
func decode[T any](data []byte, valid func(*T) bool) (T, bool) {
	var r T
	if err := json.Unmarshal(data, &r); err != nil || !valid(&r) {
		var zero T
		return zero, false
	}
	return r, true
}

func (r *breakerRecord) valid() bool {
	switch r.State {
	case stateClosed, stateOpen, stateHalfOpen:
	default:
		return false
	}
	return r.V == recordVersion && r.Failures >= 0
}

func (r *limitsRecord) valid() bool {
	for _, v := range r.Limits {
		if v < 0 {
			return false
		}
	}
	if i := r.Inferred; i != nil && (!(i.Base >= 0) || math.IsInf(i.Base, 0)) {
		return false
	}
	return r.V == recordVersion
}

func (r *holdRecord) valid() bool { return r.V == recordVersion }

func (r *capacityRecord) valid() bool {
	for _, v := range r.Levels {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	for _, v := range r.Est {
		if !(v >= 0) || math.IsInf(v, 0) {
			return false
		}
	}
	return r.V == recordVersion && !r.At.IsZero()
}

func (r *budgetRecord) valid() bool {
	if r.V != recordVersion || r.SlotMS <= 0 || len(r.Slots) > 4*guard.BudgetSlots {
		return false
	}
	for _, s := range r.Slots {
		if s.First < 0 || s.Retries < 0 {
			return false
		}
	}
	return true
}

func (r *processRecord) valid() bool { return r.V == recordVersion && r.Process != "" }
