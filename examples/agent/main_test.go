package main

import (
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/agentledger/ledger"
	"github.com/agentledger/ledger/ledgertest"
)

// The agent against an embedded ledger and a fake Anthropic API that
// rate-limits the first attempt: two attempts, one request in the ledger.
func TestAgent(t *testing.T) {
	l := ledgertest.Start(t)
	up := ledgertest.FakeAnthropic(t,
		ledgertest.RateLimited(10*time.Millisecond),
		ledgertest.Succeed(ledger.Usage{InputTokens: 300, OutputTokens: 40}))
	text, err := run(t.Context(), config{
		Session: "sess-agent", RequestID: "req-agent", Model: "claude-sonnet-4-5", Prompt: "hello",
		Options: []option.RequestOption{option.WithBaseURL(up.URL()), option.WithAPIKey("test")},
		Policy:  ledger.Policy{MaxRetries: 2, BaseDelay: 5 * time.Millisecond, MaxDelay: 50 * time.Millisecond, HintCap: time.Second},
	}, ledger.WithURL(l.URL()))
	if err != nil {
		t.Fatal(err)
	}
	if text == "" {
		t.Error("the answer has no text")
	}
	l.WaitCaughtUp(t) // run closed its publisher: every event is in the stream
	r := l.Request(t, "req-agent")
	if r.Attempts != 2 || r.Status != ledgertest.StatusSucceeded {
		t.Errorf("request: %d attempts, status %s; want 2, succeeded", r.Attempts, r.Status)
	}
	if want := (ledger.Usage{InputTokens: 300, OutputTokens: 40}); r.Usage != want || r.Billed != want {
		t.Errorf("usage %+v, billed %+v; want both %+v (a rate limit bills nothing)", r.Usage, r.Billed, want)
	}
}
