package breaker

import "sync"

// Group holds one Breaker per key (an upstream: provider and model), all
// with the same Config, created on first use. It is safe for concurrent
// use. Breakers are never removed, so keys should come from a bounded set.
type Group struct {
	cfg Config // normalized

	mu       sync.RWMutex
	breakers map[string]*Breaker
}

// NewGroup returns an empty group whose breakers use cfg. It returns an
// error wrapping ErrInvalidConfig when cfg is invalid.
func NewGroup(cfg Config) (*Group, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	return &Group{cfg: cfg, breakers: make(map[string]*Breaker)}, nil
}

// Get returns the breaker for key, creating it (closed) on first use.
// Every call with the same key returns the same *Breaker.
func (g *Group) Get(key string) *Breaker {
	g.mu.RLock()
	b, ok := g.breakers[key]
	g.mu.RUnlock()
	if ok {
		return b
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if b, ok := g.breakers[key]; ok {
		return b
	}
	b = newBreaker(key, g.cfg)
	g.breakers[key] = b
	return b
}
