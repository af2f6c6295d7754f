package gateway

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/agentledger/ledger/api"
)

// callLabels returns the labels of r's call: the gateway's defaults, then
// the client key's (k, nil without keys), then those of r's HeaderLabels,
// each over the one before (a key set in a later one wins). Several
// HeaderLabels lines count as one, joined by commas. The error names the
// header and wraps the *api.LabelError naming the key and the rule: a
// header that does not parse (api.ParseLabels), or labels that break a
// rule once merged (more than api.MaxLabels pairs).
func callLabels(r *http.Request, defaults api.Labels, k *Key) (api.Labels, error) {
	l := defaults
	if k != nil && len(k.Labels) != 0 {
		l = l.Merge(k.Labels)
	}
	where := "the client key's labels over the gateway's" // what broke the rule
	if lines := r.Header.Values(HeaderLabels); len(lines) != 0 {
		h, err := api.ParseLabels(strings.Join(lines, ","))
		if err != nil {
			return nil, fmt.Errorf("%s: %w (it takes comma-separated key=value pairs, values percent-encoded where they hold ',', '=', '%%' or other than printable ASCII)", HeaderLabels, err)
		}
		l, where = l.Merge(h), HeaderLabels+" over the client key's and the gateway's labels"
	}
	if err := l.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return l, nil
}
