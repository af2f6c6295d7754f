package bridge

import (
	"time"

	"github.com/agentledger/ledger"
	"github.com/agentledger/ledger/internal/retry"
)

// Classification converts the middleware's classification to the public
// one.
func Classification(c retry.Classification) ledger.Classification {
	return ledger.Classification{
		Kind: ledger.ErrorKind(c.Kind), Status: c.Status, Retryable: c.Retryable, Hint: c.Hint, HasHint: c.HasHint,
		Message: c.Message, ProviderRequestID: c.ProviderRequestID,
	}
}

// Classify runs an internal classifier and converts its answer; the
// provider packages' Classify functions are this.
func Classify(c retry.Classifier, err error, now time.Time) (ledger.Classification, bool) {
	got, ok := c.Classify(err, now)
	if !ok {
		return ledger.Classification{}, false
	}
	return Classification(got), true
}
