package netlimit

import (
	"fmt"
	"sync"
)

// PerKey caps the calls in flight of each key (a client). A key's entry
// lives only while it has calls in flight, so the map is bounded by the
// calls in flight.
type PerKey struct {
	max int
	mu  sync.Mutex
	n   map[string]int
}

// NewPerKey returns a cap of max calls in flight per key (at least 1).
func NewPerKey(max int) (*PerKey, error) {
	if max < 1 {
		return nil, fmt.Errorf("netlimit: the calls per key are capped at %d; the cap must be at least 1", max)
	}
	return &PerKey{max: max, n: make(map[string]int)}, nil
}

// Max is the cap.
func (p *PerKey) Max() int { return p.max }

// Acquire takes a call of key and returns its release (to call once, when
// the call ends), or reports false when key is at its cap.
func (p *PerKey) Acquire(key string) (release func(), ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n[key] >= p.max {
		return nil, false
	}
	p.n[key]++
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.n[key]--; p.n[key] <= 0 {
				delete(p.n, key)
			}
		})
	}, true
}

// InFlight is the calls in flight of key.
func (p *PerKey) InFlight(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n[key]
}
