// Package fakeprovidertest owns the helpers of the tests of the fake
// provider and of the providers' fake dialects: a server started for one
// test, the request IDs the plan gives a fault, the ledger headers of an
// attempt, a context bounded like an attempt.
//
// It is for tests only.
package fakeprovidertest

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/agentledger/ledger/internal/provider/fakekit"
	"github.com/agentledger/ledger/internal/retry"
	"github.com/agentledger/ledger/internal/sim/fakeprovider"
)

// Session is the session ID of LedgerHeaders.
const Session = "sess-1"

// Mix makes every fault likely enough that FindRequest finds one fast.
var Mix = fakeprovider.Mix{RateLimit: 0.2, Overload: 0.2, ServerError: 0.2, BilledTimeout: 0.2, BadRequest: 0.1}

// Start starts a server with opts (Seed 42 and Mix when opts is the zero
// value) speaking the dialects ds, and closes it at the end of the test.
func Start(t testing.TB, opts fakeprovider.Options, ds ...*fakekit.Dialect) *fakeprovider.Server {
	t.Helper()
	if opts.Seed == 0 && opts.Mix == (fakeprovider.Mix{}) && opts.Script == nil {
		opts.Seed, opts.Mix = 42, Mix
	}
	opts.Dialects = ds
	s, err := fakeprovider.New(opts)
	if err != nil {
		t.Fatalf("fakeprovidertest: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// Listen is Start for a server that also serves the APIs at their own
// paths (fakeprovider.Listen), with opts as given.
func Listen(t testing.TB, opts fakeprovider.Options, ds ...*fakekit.Dialect) *fakeprovider.Server {
	t.Helper()
	opts.Dialects = ds
	s, err := fakeprovider.Listen("127.0.0.1:0", opts)
	if err != nil {
		t.Fatalf("fakeprovidertest: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// FindRequest returns a request ID whose first two attempts get the
// fault.
func FindRequest(t testing.TB, p fakeprovider.Plan, prefix string, want fakeprovider.Fault) string {
	t.Helper()
	for i := range 100000 {
		id := fmt.Sprintf("%s-%d", prefix, i)
		if p.Decide(id, 0).Fault == want && p.Decide(id, 1).Fault == want {
			return id
		}
	}
	t.Fatalf("fakeprovidertest: no request ID with fault %s", want)
	return ""
}

// LedgerHeaders are the headers naming attempt attempt of call requestID
// of Session.
func LedgerHeaders(requestID string, attempt int) map[string]string {
	return map[string]string{
		fakeprovider.HeaderSessionID: Session,
		fakeprovider.HeaderRequestID: requestID,
		fakeprovider.HeaderAttempt:   strconv.Itoa(attempt),
	}
}

// AttemptCtx bounds a call the way the retry middleware's attempt timeout
// does; a stalled stream ends when it expires.
func AttemptCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// CheckSim drives the SDK client of d's Sim against a server speaking d:
// one attempt succeeds with the usage the plan gives the call, and the
// truth records the model the Sim asks for.
func CheckSim(t testing.TB, d *fakekit.Dialect) {
	t.Helper()
	if d.Sim == nil {
		t.Fatalf("fakeprovidertest: the dialect of %s has no Sim", d.Provider)
	}
	s := Start(t, fakeprovider.Options{Seed: 3}, d)
	caller, err := d.Sim.NewCaller(t.Context(), fakekit.ClientConfig{BaseURL: s.BaseURL(d.Provider), APIKey: "k", HTTPClient: http.DefaultClient, Model: d.Sim.Model, MaxTokens: 2048})
	if err != nil {
		t.Fatalf("fakeprovidertest: %s's Sim.NewCaller: %v", d.Provider, err)
	}
	rep, err := caller.Call(AttemptCtx(t), "hi", retry.Attempt{SessionID: Session, RequestID: "sim-1"})
	if err != nil {
		t.Fatalf("fakeprovidertest: %s's caller: %v", d.Provider, err)
	}
	if want := s.PlannedUsage(d.Provider, "sim-1"); rep.Usage != want {
		t.Errorf("fakeprovidertest: %s's caller reported usage %+v, want %+v", d.Provider, rep.Usage, want)
	}
	if got := s.Truth().Requests["sim-1"].Model; got != d.Sim.Model {
		t.Errorf("fakeprovidertest: %s's caller asked for model %q, want %q", d.Provider, got, d.Sim.Model)
	}
}
