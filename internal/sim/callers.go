package sim

import (
	"context"
	"fmt"
	"net/http"

	"github.com/agentledger/ledger/internal/provider/fakekit"
	"github.com/agentledger/ledger/internal/retry"
)

// simAPIKey is the credential of every simulated client: the fake
// provider only checks that there is one.
const simAPIKey = "sim-key"

// newCallers builds the SDK client of every provider of ds (each
// dialect's Sim), pointed at the fake server whose root URL is root, with
// the SDK's retries off, and the classifier of their errors.
func newCallers(ctx context.Context, ds []*fakekit.Dialect, root string, hc *http.Client) (map[string]fakekit.Caller, retry.Classifier, error) {
	callers := make(map[string]fakekit.Caller, len(ds))
	var chain retry.Chain
	for _, d := range ds {
		c, err := d.Sim.NewCaller(ctx, fakekit.ClientConfig{
			BaseURL:    d.BaseURL(root),
			APIKey:     simAPIKey,
			HTTPClient: hc,
			Model:      d.Sim.Model,
			MaxTokens:  MaxTokens,
		})
		if err != nil {
			return nil, nil, fmt.Errorf("sim: %s client: %w", d.Provider, err)
		}
		callers[d.Provider] = c
		if d.Sim.Classifier != nil {
			chain = append(chain, d.Sim.Classifier)
		}
	}
	return callers, chain, nil
}
