package emit

import "github.com/agentledger/ledger/internal/testkit"

// kitClock is the test kit's clock as a Clock: only NewTimer's result type
// needs converting.
type kitClock struct{ *testkit.Clock }

func (c kitClock) NewTimer() Timer { return c.Clock.NewTimer() }

var _ Clock = kitClock{}
