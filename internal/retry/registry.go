package retry

import (
	"slices"
	"strings"
	"sync"
)

// The classifiers of the providers whose adapter package the program
// imports: each of provider/{anthropic,openai,gemini} registers its own
// when it is initialised, and the public middleware classifies with them
// by default, so that its module does not link every SDK into every
// agent.
var registry struct {
	mu sync.RWMutex
	by map[string]Classifier
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
