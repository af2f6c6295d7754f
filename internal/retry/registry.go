package retry

import (
	"slices"
	"strings"
	"sync"

	"github.com/agentledger/ledger/internal/guard"
)

// The classifiers and the rate-limit headers of the providers whose
// package the program links: each of internal/provider/{anthropic,
// openai,gemini} registers its own when it is initialised
// (provider.Register), the public middleware classifies with them by
// default, and every middleware reads their rate-limit headers, so that
// its module does not link every SDK into every agent.
var registry struct {
	mu         sync.RWMutex
	by         map[string]Classifier
	rateLimits map[string]guard.RateLimitParser
}

// RegisterClassifier makes c the classifier of provider's errors that
// every middleware of the public package uses by default. A later
// registration under the same name replaces it.
func RegisterClassifier(provider string, c Classifier) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if registry.by == nil {
		registry.by = make(map[string]Classifier)
	}
	registry.by[provider] = c
}

// RegisteredClassifier is a provider's registered classifier.
type RegisteredClassifier struct {
	Provider   string
	Classifier Classifier
}

// RegisteredClassifiers returns the registered classifiers, by provider
// name.
func RegisteredClassifiers() []RegisteredClassifier {
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	out := make([]RegisteredClassifier, 0, len(registry.by))
	for p, c := range registry.by {
		out = append(out, RegisteredClassifier{p, c})
	}
	slices.SortFunc(out, func(a, b RegisteredClassifier) int { return strings.Compare(a.Provider, b.Provider) })
	return out
}

// RegisterRateLimits makes p the reader of provider's rate-limit headers
// that every middleware uses by default (Options.RateLimits). A later
// registration under the same name replaces it.
func RegisterRateLimits(provider string, p guard.RateLimitParser) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if registry.rateLimits == nil {
		registry.rateLimits = make(map[string]guard.RateLimitParser)
	}
	registry.rateLimits[provider] = p
}

// registeredRateLimits returns the registered reader of provider's
// rate-limit headers; nil when there is none.
func registeredRateLimits(provider string) guard.RateLimitParser {
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	return registry.rateLimits[provider]
}
