package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/projection"
)

// A feature is a part of the aggregator's work whose cost on the catch-up
// rate has a target: the bench runs the catch-up with every feature and
// without it, on the same stream, and compares.
type feature struct {
	Name string
	// Target is the most of the catch-up rate the feature may cost.
	Target float64
	// off turns the feature off in an aggregator's config.
	off func(*projection.Config)
}

// features are the with/without comparisons, in the order they run.
// Every run projects into a set of projection.ScratchNames (or the live
// one), which names every bucket the live ledger has: the runs "with"
// have whatever the projection writes.
var features = []feature{
	// Pricing (issue 19): the merge without the catalog (every attempt
	// unpriced, no lookup) instead of projection.Priced.
	{Name: "pricing", Target: 0.05, off: func(c *projection.Config) { c.Apply = (*projection.Request).Apply }},
	// Rollups (issue 20): no rollups bucket, so the batch commit writes
	// none.
	{Name: "rollups", Target: 0.10, off: func(c *projection.Config) { c.Names.Rollups = "" }},
}

// withoutFeatures turns off the features named in list (comma-separated).
func withoutFeatures(c *projection.Config, list string) error {
	for _, name := range strings.Split(list, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		i := slices.IndexFunc(features, func(f feature) bool { return f.Name == name })
		if i < 0 {
			return fmt.Errorf("--without: unknown feature %q", name)
		}
		features[i].off(c)
	}
	return nil
}

// variant is one catch-up of a round: every feature on (without ""), or
// one off.
type variant struct{ without string }

// roundOrder is the order of the catch-ups of round r: the run with every
// feature on amid those without each feature (with one feature: with,
// without; with two: without the first, with, without the second), so
// that each run without is next to the run with it is paired with; and
// reversed every other round (A B, B A, A B), so that a drift of the
// machine's load during the rounds does not favour one side.
func roundOrder(fs []feature, r int) []variant {
	var vs []variant
	for i, f := range fs {
		if i == len(fs)/2 {
			vs = append(vs, variant{})
		}
		vs = append(vs, variant{without: f.Name})
	}
	if len(fs) == 0 {
		vs = append(vs, variant{})
	}
	if r%2 == 1 {
		slices.Reverse(vs)
	}
	return vs
}

// featureResult is the comparison of the catch-up with and without one
// feature over the rounds.
type featureResult struct {
	Feature string  `json:"feature"`
	Target  float64 `json:"target"`
	// With and Without are the catch-up rates (ev/s) of each round; Costs
	// the paired cost of each round, 1 - With/Without.
	With    []float64 `json:"with_rates"`
	Without []float64 `json:"without_rates"`
	Costs   []float64 `json:"costs"`
	// WithMedian and WithoutMedian are the medians of the rates; Cost is
	// the median of the paired costs (1 - the median paired ratio), the
	// figure the verdict uses; Spread is the range of the paired costs
	// (highest minus lowest).
	WithMedian    float64 `json:"with_median"`
	WithoutMedian float64 `json:"without_median"`
	Cost          float64 `json:"cost"`
	Spread        float64 `json:"spread"`
}

// newFeatureResult computes the medians and the spread of paired rates.
func newFeatureResult(f feature, with, without []float64) featureResult {
	r := featureResult{Feature: f.Name, Target: f.Target, With: with, Without: without}
	for i := range with {
		r.Costs = append(r.Costs, 1-with[i]/without[i])
	}
	r.WithMedian, r.WithoutMedian, r.Cost = median(with), median(without), median(r.Costs)
	r.Spread = slices.Max(r.Costs) - slices.Min(r.Costs)
	return r
}

// verdict: inconclusive when the rounds disagree by more than the target
// (or there is one round: no spread is known), else whether the median
// cost is within it.
func (r featureResult) verdict() (pass, inconclusive bool) {
	if len(r.Costs) < 2 || r.Spread > r.Target {
		return false, true
	}
	return r.Cost <= r.Target, false
}

func (r featureResult) check(workload string) check {
	pass, inconclusive := r.verdict()
	got := fmt.Sprintf("%.1f%%, the median of %d paired rounds (from %.1f%% to %.1f%%, spread %.1f%%); median %.0f ev/s with, %.0f without",
		100*r.Cost, len(r.Costs), 100*slices.Min(r.Costs), 100*slices.Max(r.Costs), 100*r.Spread, r.WithMedian, r.WithoutMedian)
	if inconclusive {
		got += fmt.Sprintf(": the rounds disagree by more than the target, %.0f%% (a loaded machine? more --rounds)", 100*r.Target)
		if len(r.Costs) < 2 {
			got = fmt.Sprintf("%.1f%% in one round: no spread is known (--rounds 2 or more)", 100*r.Cost)
		}
	}
	return check{Target: fmt.Sprintf("workload %s: %s costs <= %.0f%% of the catch-up rate", workload, r.Feature, 100*r.Target),
		Got: got, Pass: pass, Inconclusive: inconclusive}
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// catchUps runs the rounds of catch-ups of one workload: each round every
// variant of roundOrder, each child into empty buckets. The first run
// with every feature on projects into the live buckets (verify and
// rebuild read that ledger afterwards, and live is its childRun); every
// other run projects into a set of its own, deleted after the run, so
// that the server holds the same between runs. It returns the live run,
// the median rate with every feature on, and one result per feature.
func catchUps(ctx context.Context, cfg config, js jetstream.JetStream, workload, url string, last uint64) (live childRun, withMedian float64, results []featureResult, err error) {
	rates := map[string][]float64{}
	for r := range cfg.Rounds {
		for _, v := range roundOrder(features, r) {
			var args []string
			set := ""
			if r > 0 || v.without != "" {
				set = fmt.Sprintf("bench-%d-%s", r, cmp.Or(v.without, "all"))
				args = append(args, "--set", set)
			}
			if v.without != "" {
				args = append(args, "--without", v.without)
			}
			run, err := runChildProcess(ctx, cfg, workload, childAggregate, url, last, args...)
			if err != nil {
				return live, 0, nil, fmt.Errorf("round %d, without %q: %w", r+1, v.without, err)
			}
			if set == "" {
				live = run
			} else if err := deleteSet(ctx, js, set); err != nil {
				return live, 0, nil, err
			}
			rates[v.without] = append(rates[v.without], run.Rate)
			fmt.Fprintf(os.Stderr, "workload %s, round %d/%d: catch-up %s: %.0f ev/s\n", workload, r+1, cfg.Rounds, describe(v), run.Rate)
		}
	}
	for _, f := range features {
		res := newFeatureResult(f, rates[""], rates[f.Name])
		results = append(results, res)
		fmt.Fprintf(os.Stderr, "workload %s: %s: %s\n", workload, f.Name, res.check(workload).Got)
	}
	return live, median(rates[""]), results, nil
}

func describe(v variant) string {
	if v.without == "" {
		return "with every feature"
	}
	return "without " + v.without
}

// deleteSet deletes the streams of the bucket set projection.ScratchNames
// names set: all of them, whatever buckets the projection has.
func deleteSet(ctx context.Context, js jetstream.JetStream, set string) error {
	lister := js.StreamNames(ctx)
	var doomed []string
	for name := range lister.Name() {
		if strings.HasPrefix(name, "KV_"+names.RebuildBucketPrefix+set+"_") || strings.HasPrefix(name, names.RebuildStreamPrefix+set+"_") {
			doomed = append(doomed, name)
		}
	}
	if err := lister.Err(); err != nil {
		return fmt.Errorf("listing the streams of %s: %w", set, err)
	}
	for _, name := range doomed {
		if err := js.DeleteStream(ctx, name); err != nil {
			return fmt.Errorf("deleting %s: %w", name, err)
		}
	}
	return nil
}

// printFeatures prints each workload's rounds of catch-ups with and
// without each feature.
func printFeatures(out io.Writer, ws []workloadResult) {
	for _, w := range ws {
		for _, f := range w.Features {
			fmt.Fprintf(out, "workload %s: catch-up with and without %s, %d rounds interleaved (ev/s)\n", w.Spec.Name, f.Feature, len(f.Costs))
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "round\twith\twithout\tcost\t")
			for i := range f.Costs {
				fmt.Fprintf(tw, "%d\t%.0f\t%.0f\t%.1f%%\t\n", i+1, f.With[i], f.Without[i], 100*f.Costs[i])
			}
			fmt.Fprintf(tw, "median\t%.0f\t%.0f\t%.1f%%\t\n", f.WithMedian, f.WithoutMedian, 100*f.Cost)
			tw.Flush()
			fmt.Fprintf(out, "cost: 1 - with/without within a round; its median is of those paired costs, not of the median rates; spread of the paired costs: %.1f%%\n\n", 100*f.Spread)
		}
	}
}
