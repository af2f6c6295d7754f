package guard

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/tokenbucket"
)

// ErrInvalidConfig is wrapped by every error New returns for a Config it
// refuses; the message names the field and the rule.
var ErrInvalidConfig = errors.New("guard: invalid config")

// Dim is a dimension of a rate limit.
type Dim int

// The dimensions of the rate limits.
const (
	Requests Dim = iota
	InputTokens
	OutputTokens
	// Tokens is input plus output tokens: OpenAI's single tokens limit.
	Tokens
	// NumDims is the number of dimensions.
	NumDims
)

// String returns the dimension's name as the messages use it.
func (d Dim) String() string {
	switch d {
	case Requests:
		return "requests"
	case InputTokens:
		return "input tokens"
	case OutputTokens:
		return "output tokens"
	case Tokens:
		return "tokens"
	}
	return "Dim(" + strconv.Itoa(int(d)) + ")"
}

// Key is the dimension's name in JSON and flags.
func (d Dim) Key() string {
	switch d {
	case Requests:
		return "requests"
	case InputTokens:
		return "input_tokens"
	case OutputTokens:
		return "output_tokens"
	case Tokens:
		return "tokens"
	}
	return "dim_" + strconv.Itoa(int(d))
}

// Limits are per-minute rate limits, by dimension; 0 means none known.
type Limits [NumDims]int64

// Any reports whether some dimension has a limit.
func (l Limits) Any() bool { return l != Limits{} }

// Over returns l, each dimension set in o replacing l's.
func (l Limits) Over(o Limits) Limits {
	for d, v := range o {
		if v > 0 {
			l[d] = v
		}
	}
	return l
}

// Dims is a set of dimensions.
type Dims [NumDims]bool

// Any reports whether the set has a dimension.
func (s Dims) Any() bool { return s != Dims{} }

// Dims is the set of dimensions l limits.
func (l Limits) Dims() Dims {
	var s Dims
	for d, v := range l {
		s[d] = v > 0
	}
	return s
}

// Cost is what one attempt uses of each dimension.
type Cost [NumDims]float64

// Defaults of a Config.
const (
	DefaultBudgetRatio  = 0.2
	DefaultBudgetMin    = 10
	DefaultBudgetWindow = time.Minute
	DefaultBurst        = tokenbucket.DefaultBurst
)

// Config configures a Set. The zero value is a Set with a breaker per
// upstream (the breaker package's defaults), no rate limits and no retry
// budget.
type Config struct {
	// Breaker configures every upstream's breaker; its Now is ignored
	// (Config.Now is used).
	Breaker breaker.Config
	// RateLimits turns the rate limiter on: limits learned from the
	// rate-limit headers the attempts report, and Limits.
	RateLimits bool
	// Limits are configured per-minute limits by upstream key; a
	// configured dimension wins over a learned one.
	Limits map[string]Limits
	// Burst is how much of a minute's limit a full bucket holds (default
	// DefaultBurst, one second, as providers enforce their limits).
	Burst time.Duration
	// Budget configures the retry budget; the zero value has none.
	Budget Budget
	// AttemptTimeout is the longest an attempt may take (the retry
	// policy's AttemptTimeout; 0: none): a fleet's probe keeps its claim
	// at least that long, so that a probe slower than the cooldown is not
	// taken over.
	AttemptTimeout time.Duration
	// Shared is the fleet's shared state; nil keeps every decision local.
	Shared Shared
	// Now is the clock; nil selects time.Now.
	Now func() time.Time
}

// Standard is the configuration the commands and the public packages
// use: the breakers of b, rate limits learned from the providers'
// rate-limit headers, and the default retry budget (20 % of first
// attempts plus 10, over a sliding minute).
func Standard(b breaker.Config) Config {
	return Config{Breaker: b, RateLimits: true, Budget: Budget{On: true}}
}

// Budget configures a retry budget: a retry is allowed while the retries
// of the last Window stay within Ratio times its first attempts plus Min.
type Budget struct {
	// On turns the budget on; the zero fields then take the defaults
	// (20 %, 10, one minute).
	On     bool
	Ratio  float64
	Min    int
	Window time.Duration
	// Exact: a zero Ratio or Min means none, not the default.
	Exact bool
}

// BudgetOf is the budget of percent of the first attempts plus
// minPerMinute retries a minute (scaled to the window), over window.
func BudgetOf(percent, minPerMinute float64, window time.Duration) Budget {
	return Budget{On: true, Ratio: percent / 100, Min: int(math.Round(minPerMinute * window.Minutes())), Window: window, Exact: true}
}

// Params are the settings a Shared backend needs for an upstream.
type Params struct {
	FailureThreshold int
	Cooldown         time.Duration
	Burst            time.Duration
	Budget           Budget
	AttemptTimeout   time.Duration
	// Configured are the configured limits of the upstream, if any.
	Configured Limits
}

// normalize validates c and applies the defaults.
func (c Config) normalize() (Config, error) {
	var errs []error
	bad := func(field, rule string) { errs = append(errs, fmt.Errorf("%w: %s %s", ErrInvalidConfig, field, rule)) }
	if c.AttemptTimeout < 0 {
		bad("AttemptTimeout", "is "+c.AttemptTimeout.String()+"; it must not be negative (0: none)")
	}
	if c.Burst < 0 {
		bad("Burst", "is "+c.Burst.String()+"; it must not be negative (0 selects 1s)")
	}
	b := c.Budget
	if b.On {
		switch {
		case !(b.Ratio >= 0 && b.Ratio <= 10) || math.IsNaN(b.Ratio):
			bad("Budget.Ratio", "is "+strconv.FormatFloat(b.Ratio, 'g', -1, 64)+"; it must be from 0 to 10 (0 selects 0.2)")
		case b.Min < 0:
			bad("Budget.Min", "is "+strconv.Itoa(b.Min)+"; it must not be negative (0 selects 10)")
		case b.Window < 0:
			bad("Budget.Window", "is "+b.Window.String()+"; it must not be negative (0 selects 1m)")
		}
	}
	for key, l := range c.Limits {
		for d, v := range l {
			if v < 0 {
				bad("Limits["+strconv.Quote(key)+"]", Dim(d).String()+" is "+strconv.FormatInt(v, 10)+"; it must not be negative")
			}
		}
	}
	if len(errs) > 0 {
		return c, errors.Join(errs...)
	}
	if c.Burst == 0 {
		c.Burst = DefaultBurst
	}
	if b.On {
		if b.Ratio == 0 && !b.Exact {
			b.Ratio = DefaultBudgetRatio
		}
		if b.Min == 0 && !b.Exact {
			b.Min = DefaultBudgetMin
		}
		if b.Window == 0 {
			b.Window = DefaultBudgetWindow
		}
		c.Budget = b
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}
