package guardflag

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/agentledger/ledger/internal/guard"
)

// Flags are the guards' settings.
type Flags struct {
	limits  []string
	file    string
	percent float64
	min     float64
	window  time.Duration
}

// The keys of a limit, and their dimensions.
var limitKeys = map[string]guard.Dim{
	"rpm":  guard.Requests,
	"itpm": guard.InputTokens,
	"otpm": guard.OutputTokens,
	"tpm":  guard.Tokens,
}

// LimitSyntax describes a limit, for the flags' help and the errors.
const LimitSyntax = "UPSTREAM=KEY:N[,KEY:N...] with UPSTREAM a call's upstream (provider/model, e.g. gemini/gemini-2.5-flash) and KEY rpm (requests), tpm (input plus output tokens), itpm (input tokens) or otpm (output tokens) per minute"

// Register registers the flags on fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.Func("limit", "a rate limit of an upstream whose responses say none (Gemini sends no rate-limit headers), repeatable: "+LimitSyntax+"; e.g. --limit gemini/gemini-2.5-flash=rpm:1000,tpm:4000000. It wins over the limits learned from the headers. Without one, a limit is inferred from the 429s",
		func(s string) error { f.limits = append(f.limits, s); return nil })
	fs.StringVar(&f.file, "limits-file", "", "a file of rate limits, one --limit value a line (# starts a comment)")
	fs.Float64Var(&f.percent, "retry-budget-percent", 100*guard.DefaultBudgetRatio, "the retry budget: retries allowed as a percentage of the first attempts of the window, from 0 to 1000")
	fs.Float64Var(&f.min, "retry-budget-min", guard.DefaultBudgetMin, "the retry budget: retries allowed per minute whatever the first attempts (a floor for a quiet upstream)")
	fs.DurationVar(&f.window, "retry-budget-window", guard.DefaultBudgetWindow, "the retry budget: the sliding window it counts first attempts and retries over")
}

// Apply validates the flags and sets cfg's Limits and Budget (the budget
// only when cfg.Budget.On).
func (f *Flags) Apply(cfg *guard.Config) error {
	limits, err := f.Limits()
	if err != nil {
		return err
	}
	if len(limits) > 0 {
		cfg.Limits = limits
	}
	if !cfg.Budget.On {
		return nil
	}
	b, err := Budget(f.percent, f.min, f.window, FlagNames)
	if err != nil {
		return err
	}
	cfg.Budget = b
	return nil
}

// Names are what the settings of a retry budget are called where they
// are set: the percentage, the minimum per minute, the window.
type Names [3]string

// FlagNames are the flags' names.
var FlagNames = Names{"--retry-budget-percent", "--retry-budget-min", "--retry-budget-window"}

// Budget is the retry budget of percent of first attempts plus min
// retries a minute, over window; the error names the setting (as names
// call it) and the rule.
func Budget(percent, minPerMinute float64, window time.Duration, names Names) (guard.Budget, error) {
	switch {
	case !(percent >= 0 && percent <= 1000):
		return guard.Budget{}, fmt.Errorf("%s: %v must be from 0 to 1000", names[0], percent)
	case !(minPerMinute >= 0 && minPerMinute <= 1e6):
		return guard.Budget{}, fmt.Errorf("%s: %v must be from 0 to 1000000", names[1], minPerMinute)
	case window < time.Second || window > time.Hour:
		return guard.Budget{}, fmt.Errorf("%s: %s must be from 1s to 1h", names[2], window)
	}
	return guard.BudgetOf(percent, minPerMinute, window), nil
}

// Limits are the limits of --limit and --limits-file, by upstream.
func (f *Flags) Limits() (map[string]guard.Limits, error) {
	out := map[string]guard.Limits{}
	for _, s := range f.limits {
		if err := addLimit(out, s); err != nil {
			return nil, fmt.Errorf("--limit: %w", err)
		}
	}
	if f.file == "" {
		return out, nil
	}
	fh, err := os.Open(f.file)
	if err != nil {
		return nil, fmt.Errorf("--limits-file: %w", err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		if err := addLimit(out, line); err != nil {
			return nil, fmt.Errorf("--limits-file: %s line %d: %w", f.file, n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--limits-file: %s: %w", f.file, err)
	}
	return out, nil
}

// ParseLimit reads one limit: UPSTREAM=KEY:N[,KEY:N...].
func ParseLimit(s string) (string, guard.Limits, error) {
	var l guard.Limits
	up, spec, ok := strings.Cut(strings.TrimSpace(s), "=")
	up = strings.TrimSpace(up)
	if !ok || up == "" || strings.TrimSpace(spec) == "" {
		return "", l, fmt.Errorf("%q must be %s", s, LimitSyntax)
	}
	if strings.ContainsAny(up, " \t") || len(up) > 256 {
		return "", l, fmt.Errorf("%q: the upstream %q must have no blanks and at most 256 bytes", s, up)
	}
	for part := range strings.SplitSeq(spec, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), ":")
		d, known := limitKeys[strings.ToLower(strings.TrimSpace(k))]
		if !ok || !known {
			return "", l, fmt.Errorf("%q: %q must be KEY:N with KEY rpm, tpm, itpm or otpm", s, part)
		}
		n, err := strconv.ParseInt(strings.ReplaceAll(strings.TrimSpace(v), "_", ""), 10, 64)
		if err != nil || n < 1 || n > math.MaxInt64/2 {
			return "", l, fmt.Errorf("%q: %s must be a whole number of at least 1 per minute", s, k)
		}
		if l[d] != 0 {
			return "", l, fmt.Errorf("%q: %s is given twice", s, k)
		}
		l[d] = n
	}
	return up, l, nil
}

func addLimit(out map[string]guard.Limits, s string) error {
	up, l, err := ParseLimit(s)
	if err != nil {
		return err
	}
	if _, dup := out[up]; dup {
		return errors.New("the limits of " + up + " are given twice")
	}
	out[up] = l
	return nil
}
