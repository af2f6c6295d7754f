package projection

import (
	"os"
	"runtime/debug"
)

// MemoryLimit is the soft memory limit of the Go runtime that the
// aggregator runs under (LimitMemory): the working set is bounded by the
// batch size, the read-ahead and the cache, and the limit keeps the
// garbage collector from letting the heap grow to twice that set, so the
// process stays well under 256 MiB whatever the number of keys.
const MemoryLimit = 192 << 20

// LimitMemory sets the runtime's soft memory limit to MemoryLimit, unless
// the GOMEMLIMIT environment variable sets one. Commands that run an
// Aggregator call it at start.
func LimitMemory() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(MemoryLimit)
	}
}
