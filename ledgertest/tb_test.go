package ledgertest_test

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
)

// tb is the testing.TB of the examples, which have no t of their own (in
// a test, pass the test's t), and of the tests that check what a helper
// fails with. It implements the methods ledgertest calls (Helper,
// TempDir, Cleanup, Errorf, Fatalf); the others are the embedded nil
// TB's, and panic.
type tb struct {
	testing.TB
	goexit bool // Fatalf ends the goroutine (a test's helper) instead of panicking (an example)

	mu       sync.Mutex
	cleanups []func()
	errs     []string
	fatal    string
}

func (t *tb) Helper() {}

func (t *tb) TempDir() string {
	dir, err := os.MkdirTemp("", "ledgertest-example-")
	if err != nil {
		panic(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func (t *tb) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

func (t *tb) Errorf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.errs = append(t.errs, fmt.Sprintf(format, args...))
}

func (t *tb) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if !t.goexit {
		panic(msg)
	}
	t.mu.Lock()
	t.fatal = msg
	t.mu.Unlock()
	runtime.Goexit()
}

// close runs the cleanups, last registered first, and panics on an error
// one of them reported.
func (t *tb) close() {
	t.mu.Lock()
	cs := t.cleanups
	t.cleanups = nil
	t.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
	if len(t.errs) > 0 {
		panic(fmt.Sprint(t.errs))
	}
}

// fatalOf runs f with a tb of its own in a goroutine of its own and
// returns the message f failed with ("" when it did not).
func fatalOf(f func(t testing.TB)) string {
	t := &tb{goexit: true}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(t)
	}()
	<-done
	t.close()
	return t.fatal
}
