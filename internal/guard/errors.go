package guard

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// ErrRateLimited is wrapped by every *LimitError.
var ErrRateLimited = errors.New("rate limited")

// ErrBudgetSpent is wrapped by every *BudgetError.
var ErrBudgetSpent = errors.New("retry budget spent")

// ErrUnavailable is returned by a Shared backend that cannot take a
// decision now (unreachable, slow); the Guard then decides locally.
var ErrUnavailable = errors.New("guard: shared state unavailable")

// LimitError names the rate limit, or the hold after a 429, that keeps an
// attempt of an upstream waiting.
type LimitError struct {
	Upstream string
	// Fleet is true for the fleet's shared limit, false for this
	// process's.
	Fleet bool
	// Dim and PerMinute name the limit when Hold is false.
	Dim       Dim
	PerMinute int64
	// Hold is true when the upstream is held until Until, after a 429;
	// Reason says what was seen, and by whom.
	Hold   bool
	Until  time.Time
	Reason string
}

func (e *LimitError) Error() string {
	var b strings.Builder
	if e.Fleet {
		b.WriteString("fleet ")
	} else {
		b.WriteString("process ")
	}
	if e.Hold {
		b.WriteString("hold of " + e.Upstream + " until " + e.Until.UTC().Format(time.RFC3339Nano))
		if e.Reason != "" {
			b.WriteString(" (" + e.Reason + ")")
		}
		return b.String()
	}
	b.WriteString("rate limit of " + e.Upstream + ": " + strconv.FormatInt(e.PerMinute, 10) + " " + e.Dim.String() + "/min")
	return b.String()
}

// Unwrap returns ErrRateLimited.
func (e *LimitError) Unwrap() error { return ErrRateLimited }

// BudgetError says that the retry budget of an upstream is spent.
type BudgetError struct {
	Upstream string
	Fleet    bool
	// Retries and First are the retries and first attempts of the window.
	Retries, First int64
	Ratio          float64
	Min            int
	Window         time.Duration
}

func (e *BudgetError) Error() string {
	scope := "process"
	if e.Fleet {
		scope = "fleet"
	}
	return scope + " retry budget of " + e.Upstream + " spent: " + strconv.FormatInt(e.Retries, 10) +
		" retries for " + strconv.FormatInt(e.First, 10) + " first attempts in the last " + e.Window.String() +
		" (at most " + strconv.FormatFloat(e.Ratio*100, 'f', -1, 64) + " % plus " + strconv.Itoa(e.Min) +
		"; to allow more, raise the retry budget's percentage or its minimum per minute: --retry-budget-percent, --retry-budget-min, or RetryBudget in ledger.FleetConfig)"
}

// Unwrap returns ErrBudgetSpent.
func (e *BudgetError) Unwrap() error { return ErrBudgetSpent }
