// Package guardflag owns the command-line settings of the guards that
// every command with guards takes (publisher simulate, gateway run): the
// rate limits of upstreams whose responses say none (--limit, repeatable,
// and --limits-file), and the retry budget (--retry-budget-percent,
// --retry-budget-min, --retry-budget-window). It turns them into a
// guard.Config, or an error naming the flag and the rule.
package guardflag
