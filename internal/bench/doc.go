// Package bench owns the workloads of the benchmark harness (cmd/bench):
// deterministic streams of valid v1 attempt events shaped like the
// performance targets (ordinary traffic, skewed sessions, many keys).
package bench
