package provider

import (
	"fmt"
	"regexp"
	"slices"
	"sync"

	"github.com/agentledger/ledger/internal/retry"
)

// nameRule is the grammar of a provider's name: it is a path segment of
// the gateway's routes (/NAME/v1/...), a key of the guards and a field of
// every event, so it is short, lower case and needs no escaping.
var nameRule = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// ValidateName checks a provider's name against the rule every name
// follows; the error names field.
func ValidateName(field, name string) error {
	if !nameRule.MatchString(name) {
		return fmt.Errorf("%s: %q must be 1 to 32 characters of a-z, 0-9, '_' and '-', starting with a letter", field, name)
	}
	return nil
}

// Registry is a set of providers by name. The zero value is empty and
// ready; a Registry is safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	by    map[string]Provider
	order []string
}

// Add adds p. It fails when p's name breaks the rule or is taken.
func (r *Registry) Add(p Provider) error {
	name := p.Name()
	if err := ValidateName("provider name", name); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.by[name]; ok {
		return fmt.Errorf("provider name: %q is already registered", name)
	}
	if r.by == nil {
		r.by = make(map[string]Provider)
	}
	r.by[name] = p
	r.order = append(r.order, name)
	return nil
}

// Lookup returns the provider named name.
func (r *Registry) Lookup(name string) (Provider, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	p, ok := r.by[name]
	return p, ok
}

// All returns the providers in the order they were added.
func (r *Registry) All() []Provider {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Provider, 0, len(r.order))
	for _, n := range r.order {
		out = append(out, r.by[n])
	}
	return out
}

// Names returns the providers' names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(slices.Values(r.order))
}

// builtin holds the providers whose package the program links: each
// registers itself when it is initialised.
var builtin Registry

// Register adds p to the built-in providers, its classifier to the ones
// the public middleware uses by default, and its rate-limit headers to
// the ones every retry middleware reads by default
// (retry.RegisterRateLimits): the one registration a provider makes. It is called from the init
// of the provider's package, and panics on a name that breaks the rule or
// is taken: a programming error.
func Register(p Provider) {
	if err := builtin.Add(p); err != nil {
		panic("provider: " + err.Error())
	}
	retry.RegisterClassifier(p.Name(), p.Classifier())
	retry.RegisterRateLimits(p.Name(), p)
}

// Lookup returns the built-in provider named name.
func Lookup(name string) (Provider, bool) { return builtin.Lookup(name) }

// All returns the built-in providers, in the order they registered.
func All() []Provider { return builtin.All() }

// Names returns the built-in providers' names, sorted.
func Names() []string { return builtin.Names() }

// Builtin returns a new Registry holding the built-in providers, in the
// order they registered, for a program to add its own to (the gateway's
// OpenAI-compatible upstreams).
func Builtin() *Registry {
	r := &Registry{}
	for _, p := range All() {
		_ = r.Add(p) // valid and distinct: Register checked
	}
	return r
}
