package events

import (
	"sync"

	"github.com/agentledger/ledger/api"
)

// LabelInterner hands DecodeInterned one api.Labels per distinct label set,
// shared by every event that carries it: a fleet's events repeat a few
// label sets (a team, a user, an agent), so a batch of 20,000 events holds
// a few maps instead of 20,000. The maps it hands out are shared: nothing
// may write to them. It keeps at most max sets and about
// InternedLabelBytes of them, and forgets them all when either is
// reached, so a stream of ever new label sets costs about what it cost
// without it. Safe for concurrent use.
type LabelInterner struct {
	mu    sync.Mutex
	sets  map[string]api.Labels
	max   int
	bytes int // estimated, of the sets held
}

// DefaultInternedLabelSets is the most label sets an interner made by
// NewLabelInterner(0) keeps.
const DefaultInternedLabelSets = 1 << 16

// InternedLabelBytes bounds the memory of an interner's sets (estimated:
// the key, the map and its strings), whatever their number.
const InternedLabelBytes = 8 << 20

// NewLabelInterner returns an interner of at most max label sets
// (DefaultInternedLabelSets when max is not positive).
func NewLabelInterner(max int) *LabelInterner {
	if max <= 0 {
		max = DefaultInternedLabelSets
	}
	return &LabelInterner{sets: make(map[string]api.Labels), max: max}
}

// get returns the set whose canonical key is key, or nil.
func (in *LabelInterner) get(key []byte) api.Labels {
	in.mu.Lock()
	l := in.sets[string(key)] // no allocation: the conversion is only a lookup
	in.mu.Unlock()
	return l
}

// put keeps l under key, forgetting every set first when full.
func (in *LabelInterner) put(key []byte, l api.Labels) {
	// The key, the strings of l (about as long), the map's header and a
	// group of slots per 8 pairs.
	size := 2*len(key) + 64 + 48*len(l) + 8*((len(l)+7)/8)*33
	in.mu.Lock()
	if len(in.sets) >= in.max || in.bytes+size > InternedLabelBytes {
		clear(in.sets)
		in.bytes = 0
	}
	in.sets[string(key)] = l
	in.bytes += size
	in.mu.Unlock()
}

// Len is the number of label sets the interner holds.
func (in *LabelInterner) Len() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.sets)
}
