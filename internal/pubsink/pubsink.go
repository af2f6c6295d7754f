package pubsink

import "github.com/agentledger/ledger/internal/retry"

var of func(any) retry.Sink

// Register sets the function Of calls. Package ledger calls it once, in
// its init.
func Register(f func(any) retry.Sink) { of = f }

// Of is the Sink inside p, a *ledger.Publisher; nil when p is not one (or
// is nil).
func Of(p any) retry.Sink {
	if of == nil {
		return nil
	}
	return of(p)
}
