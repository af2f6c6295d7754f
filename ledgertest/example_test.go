package ledgertest_test

import (
	"context"
	"fmt"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/agentledger/ledger"
	"github.com/agentledger/ledger/ledgertest"
	"github.com/agentledger/ledger/provider/anthropic"
)

// A call whose request_id the middleware makes: DoResult returns it, and
// WaitRequest waits for the call's final record, without waiting for the
// rest of the stream. The fake upstream rate-limits the first attempt.
func ExampleLedger_WaitRequest() {
	t := &tb{} // in a test: the test's t
	defer t.close()

	l := ledgertest.Start(t)
	up := ledgertest.FakeAnthropic(t,
		ledgertest.RateLimited(10*time.Millisecond),
		ledgertest.Succeed(ledger.Usage{InputTokens: 300, OutputTokens: 40}))
	mw, err := ledger.NewMiddleware(l.Publisher(t), ledger.WithPolicy(quick), ledger.WithClassifiers(anthropic.Classifier))
	if err != nil {
		panic(err)
	}
	client := sdk.NewClient(append([]option.RequestOption{option.WithBaseURL(up.URL()), option.WithAPIKey("test")}, anthropic.ClientOptions()...)...)

	call := ledger.Call{SessionID: "sess-1", Provider: anthropic.Name, Model: "claude-sonnet-4-5"} // no RequestID: a new ULID
	res, err := ledger.DoResult(context.Background(), mw, call, streamCall(client))
	if err != nil {
		panic(err)
	}
	r := l.WaitRequest(t, res.RequestID)
	fmt.Println("attempts:", res.Attempts, r.Attempts)
	fmt.Println("status:", r.Status)
	fmt.Println("usage in/out:", r.Usage.InputTokens, r.Usage.OutputTokens)
	// Output:
	// attempts: 2 2
	// status: succeeded
	// usage in/out: 300 40
}

// LookupRequest and LookupSession report an absent record without
// failing the test: on a ledger that has nothing yet, and for a request
// it never saw.
func ExampleLedger_LookupRequest() {
	t := &tb{} // in a test: the test's t
	defer t.close()

	l := ledgertest.Start(t)
	l.WaitCaughtUp(t)
	_, ok := l.LookupRequest(t, "req-never-made")
	fmt.Println("on an empty ledger:", ok)

	up := ledgertest.FakeAnthropic(t, ledgertest.Succeed(ledger.Usage{InputTokens: 10, OutputTokens: 2}))
	mw, err := ledger.NewMiddleware(l.Publisher(t), ledger.WithPolicy(quick), ledger.WithClassifiers(anthropic.Classifier))
	if err != nil {
		panic(err)
	}
	client := sdk.NewClient(append([]option.RequestOption{option.WithBaseURL(up.URL()), option.WithAPIKey("test")}, anthropic.ClientOptions()...)...)
	call := ledger.Call{SessionID: "sess-2", RequestID: "req-made", Provider: anthropic.Name, Model: "claude-sonnet-4-5"}
	if _, err := ledger.Do(context.Background(), mw, call, streamCall(client)); err != nil {
		panic(err)
	}
	l.WaitCaughtUp(t)

	r, ok := l.LookupRequest(t, "req-made")
	fmt.Println("req-made:", ok, r.Status)
	_, ok = l.LookupRequest(t, "req-never-made")
	fmt.Println("req-never-made:", ok)
	s, ok := l.LookupSession(t, "sess-2")
	fmt.Println("sess-2:", ok, s.Requests)
	// Output:
	// on an empty ledger: false
	// req-made: true succeeded
	// req-never-made: false
	// sess-2: true 1
}
