// Package p25 is a test in another module that uses the ledger's public
// test kit to show P25: the provider bills a failed attempt, the retry
// succeeds, and the ledger keeps usage (the winning attempt) and billed
// (every attempt) apart instead of counting the call twice.
package p25

import (
	"context"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/agentledger/ledger"
	"github.com/agentledger/ledger/ledgertest"
	"github.com/agentledger/ledger/provider/anthropic"
)

func TestBilledFailedAttemptThenSuccess(t *testing.T) {
	l := ledgertest.Start(t)
	up := ledgertest.FakeAnthropic(t,
		ledgertest.FailAfterBilling(ledger.Usage{InputTokens: 500}),            // a 500 after billing the input
		ledgertest.Succeed(ledger.Usage{InputTokens: 500, OutputTokens: 1200})) // the retry
	mw, err := ledger.NewMiddleware(l.Publisher(t),
		ledger.WithPolicy(ledger.Policy{MaxRetries: 2, BaseDelay: 5 * time.Millisecond, MaxDelay: 50 * time.Millisecond, HintCap: time.Second}),
		ledger.WithClassifiers(anthropic.Classifier))
	if err != nil {
		t.Fatal(err)
	}
	client := sdk.NewClient(append([]option.RequestOption{option.WithBaseURL(up.URL()), option.WithAPIKey("test")},
		anthropic.ClientOptions()...)...)

	// No RequestID: the middleware makes one, and DoResult returns it.
	call := ledger.Call{SessionID: "sess-p25", Provider: anthropic.Name, Model: "claude-sonnet-4-5"}
	res, err := ledger.DoResult(t.Context(), mw, call, func(ctx context.Context, a ledger.Attempt) (*sdk.Message, ledger.Report, error) {
		stream := client.Messages.NewStreaming(ctx, sdk.MessageNewParams{
			Model: "claude-sonnet-4-5", MaxTokens: 2048,
			Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("summarise the incident"))},
		})
		defer stream.Close()
		var usage anthropic.StreamUsage
		var m sdk.Message
		for stream.Next() {
			usage.Observe(stream.Current())
			if err := m.Accumulate(stream.Current()); err != nil {
				return nil, ledger.Report{Usage: usage.Usage()}, err
			}
		}
		return &m, ledger.Report{Usage: usage.Usage()}, stream.Err()
	})
	if err != nil {
		t.Fatal(err)
	}

	r := l.WaitRequest(t, res.RequestID) // the call's final record
	if want := (ledger.Usage{InputTokens: 500, OutputTokens: 1200}); r.Usage != want {
		t.Errorf("usage %+v, want %+v: only the winning attempt", r.Usage, want)
	}
	if want := (ledger.Usage{InputTokens: 1000, OutputTokens: 1200}); r.Billed != want {
		t.Errorf("billed %+v, want %+v: every attempt", r.Billed, want)
	}
	if r.Attempts != 2 || r.WinningAttempt != 1 {
		t.Errorf("%d attempts, winner %d; want 2 and 1", r.Attempts, r.WinningAttempt)
	}
	s := l.Session(t, "sess-p25")
	if s.Usage != r.Usage || s.Billed != r.Billed {
		t.Errorf("session %+v differs from its one request %+v", s, r)
	}
	if up.Requests() != 2 {
		t.Errorf("the upstream saw %d requests, want 2: the SDK's own retries must be off", up.Requests())
	}
}
