package providertest

import (
	"fmt"
	"runtime/debug"
	"testing"
)

// suiteT is what a scenario needs of its test: testing.TB and subtests.
// Run gives it a *testing.T; the suite's own test gives it a recorder, to
// show that a broken provider fails the scenario that covers its defect.
type suiteT interface {
	testing.TB
	Run(name string, f func(t suiteT)) bool
}

// stdT is a *testing.T as a suiteT.
type stdT struct{ *testing.T }

func (s stdT) Run(name string, f func(t suiteT)) bool {
	return s.T.Run(name, func(t *testing.T) { f(stdT{t}) })
}

// noPanic calls fn and fails t, rather than the whole test binary, when fn
// panics: network input must never make a provider panic.
func noPanic(t testing.TB, what string, fn func()) (ok bool) {
	t.Helper()
	defer func() {
		if v := recover(); v != nil {
			t.Errorf("%s panicked: %v\n%s", what, v, debug.Stack())
			ok = false
		}
	}()
	fn()
	return true
}

// describe quotes b for a failure message, cut to a readable length.
func describe(b []byte) string {
	const max = 80
	if len(b) > max {
		return fmt.Sprintf("%q...", b[:max])
	}
	return fmt.Sprintf("%q", b)
}
