package main

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// check is one target and whether this run met it.
type check struct {
	Target string `json:"target"`
	Got    string `json:"got"`
	Pass   bool   `json:"pass"`
	// Inconclusive: the measurements disagree too much to say (Pass is
	// then false).
	Inconclusive bool `json:"inconclusive,omitempty"`
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

func evaluate(res results) []check {
	var cs []check
	for _, w := range res.Workloads {
		cs = append(cs, check{Target: fmt.Sprintf("workload %s: aggregator/raw >= %.1f", w.Spec.Name, targetRatio), Got: fmt.Sprintf("%.2f", w.Ratio), Pass: w.Ratio >= targetRatio})
		cs = append(cs, newCheck(fmt.Sprintf("workload %s: rebuild/raw >= %.1f", w.Spec.Name, targetRatio), fmt.Sprintf("%.2f", w.RebuildRatio), w.RebuildRatio >= targetRatio))
		for _, f := range w.Features {
			cs = append(cs, f.check(w.Spec.Name))
		}
		cs = append(cs, newCheck(fmt.Sprintf("workload %s: verify >= aggregator catch-up rate", w.Spec.Name), fmt.Sprintf("%.2fx", w.VerifyVsAggregator), w.VerifyVsAggregator >= 1))
		vrss := mib(w.Verify.PeakRSSBytes)
		cs = append(cs, newCheck(fmt.Sprintf("workload %s: verify peak RSS < %d MiB", w.Spec.Name, targetPeakRSSMiB), fmt.Sprintf("%.0f MiB", vrss), vrss < targetPeakRSSMiB))
		cs = append(cs, newCheck(fmt.Sprintf("workload %s: publish >= %d ev/s", w.Spec.Name, targetPublishRate), fmt.Sprintf("%.0f", w.PublishRate), w.PublishRate >= targetPublishRate))
		if w.Spec.Name == "c" {
			rss := mib(w.Aggregator.PeakRSSBytes)
			cs = append(cs, newCheck(fmt.Sprintf("workload c: aggregator peak RSS < %d MiB", targetPeakRSSMiB), fmt.Sprintf("%.0f MiB", rss), rss < targetPeakRSSMiB))
		}
	}
	for _, m := range res.Middleware {
		if !m.Target {
			continue
		}
		cs = append(cs, newCheck(m.Name+fmt.Sprintf(": < %d ns/op", targetMiddlewareNs), fmt.Sprintf("%.0f", m.NsPerOp), m.NsPerOp < targetMiddlewareNs))
		cs = append(cs, newCheck(m.Name+fmt.Sprintf(": < %d allocs/op", targetAllocs), fmt.Sprintf("%d", m.AllocsPerOp), m.AllocsPerOp < targetAllocs))
	}
	cs = append(cs, evaluateGateway(res.Gateway)...)
	if res.Fleet != nil {
		cs = append(cs, evaluateFleet(res.Fleet)...)
	}
	return cs
}

func printTable(out io.Writer, res results) {
	mc := res.Machine
	fmt.Fprintf(out, "machine: %d CPUs, %s, %.1f GiB, %s/%s, %s, nats-server %s, commit %s (dirty %v)\n",
		mc.CPUs, mc.CPUModel, float64(mc.MemTotalBytes)/(1<<30), mc.GOOS, mc.GOARCH, mc.GoVersion, mc.NATSServer, mc.GitCommit, mc.GitDirty)
	fmt.Fprintf(out, "raw consumer: %s\n\n", res.RawMethod)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tevents\tsessions\tpublish ev/s\traw ev/s\tcatch-up ev/s\tratio\trebuild ev/s\tratio\tverify ev/s\tratio\tverify/agg\tagg RSS MiB\tagg heap MiB\tverify RSS MiB\traw RSS MiB\t")
	for _, w := range res.Workloads {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%.0f\t%.0f\t%.2f\t%.0f\t%.2f\t%.0f\t%.2f\t%.2f\t%.0f\t%.0f\t%.0f\t%.0f\t\n", w.Spec.Name, w.Events, w.Spec.Sessions,
			w.PublishRate, w.Raw.Rate, w.CatchUpRate, w.Ratio, w.Rebuild.Rate, w.RebuildRatio, w.Verify.Rate, w.VerifyRatio, w.VerifyVsAggregator,
			mib(w.Aggregator.PeakRSSBytes), mib(w.Aggregator.HeapInusePeak), mib(w.Verify.PeakRSSBytes), mib(w.Raw.PeakRSSBytes))
	}
	tw.Flush()
	fmt.Fprintln(out, "(catch-up: the median of the rounds with every feature on)")
	fmt.Fprintln(out)
	printFeatures(out, res.Workloads)
	printDurable(out, res.Workloads)
	for _, m := range res.Middleware {
		note := ""
		if !m.Target {
			note = " (informational: includes the publisher's share of the machine; the target applies to the MemorySink line)"
		}
		fmt.Fprintf(out, "middleware %s: %.0f ns/op, %d allocs/op, %d B/op (n=%d)%s\n", m.Name, m.NsPerOp, m.AllocsPerOp, m.BytesPerOp, m.N, note)
	}
	fmt.Fprintln(out)
	if res.Fleet != nil {
		printFleet(out, res.Fleet)
	}
	for _, c := range res.Targets {
		verdict := "FAIL"
		switch {
		case c.Inconclusive:
			verdict = "inconclusive"
		case c.Pass:
			verdict = "pass"
		}
		fmt.Fprintf(out, "%-12s  %s: %s\n", verdict, c.Target, c.Got)
	}
}

// printDurable compares, per workload, the catch-up and publish rates on
// the old default (fsync every 2 minutes) and on sync_interval always.
func printDurable(out io.Writer, ws []workloadResult) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := false
	for _, w := range ws {
		d := w.Durable
		if d == nil {
			continue
		}
		if !header {
			fmt.Fprintln(out, "durability: the same workload on a server with the old default (sync_interval 2m) and with sync_interval always")
			fmt.Fprintln(tw, "workload\tcatch-up ev/s 2m\tcatch-up ev/s always\tratio\tpublish ev/s 2m\tpublish ev/s always\tratio\t")
			header = true
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.2f\t%.0f\t%.0f\t%.2f\t\n", w.Spec.Name, w.CatchUpRate, d.Aggregator.Rate, d.CatchUpVsOld,
			w.PublishRate, d.PublishRate, d.PublishVsOld)
	}
	tw.Flush()
	if header {
		fmt.Fprintln(out)
	}
}

// newCheck is a target with a pass or fail verdict.
func newCheck(target, got string, pass bool) check {
	return check{Target: target, Got: got, Pass: pass}
}
