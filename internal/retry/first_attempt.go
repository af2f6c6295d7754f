package retry

import (
	"strconv"

	"github.com/agentledger/ledger/internal/events"
)

// checkFirstAttempt applies the rule of Call.FirstAttempt: from 0, and
// leaving room for every attempt the policy allows within the contract's
// attempt numbers.
func (m *Middleware) checkFirstAttempt(first int) error {
	last := events.MaxAttempt - m.policy.MaxRetries
	if first < 0 || first > last {
		return fieldError("first_attempt", "is "+strconv.Itoa(first)+"; with "+strconv.Itoa(m.policy.MaxRetries)+
			" retries it must be from 0 to "+strconv.Itoa(last)+", so that every attempt number is at most "+
			strconv.Itoa(events.MaxAttempt))
	}
	return nil
}
