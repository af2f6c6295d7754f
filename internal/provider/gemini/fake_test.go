package gemini

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/sim/fakeprovider"
	fpt "github.com/agentledger/ledger/internal/sim/fakeprovider/fakeprovidertest"
)

const fakeModel = "gemini-2.5-flash"

// TestMain silences the standard logger, through which genai reports every
// stream that fails, as the stalled and broken ones of the fake do on
// purpose.
func TestMain(m *testing.M) {
	log.SetOutput(io.Discard)
	os.Exit(m.Run())
}

func fakeClient(t *testing.T, base string) *genai.Client {
	t.Helper()
	c, err := genai.NewClient(t.Context(), ClientConfig(&genai.ClientConfig{
		APIKey:      "test-key",
		Backend:     genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: base},
	}))
	require.NoError(t, err)
	return c
}

func fakeConfig(requestID string, attempt int) *genai.GenerateContentConfig {
	h := http.Header{}
	for k, v := range fpt.LedgerHeaders(requestID, attempt) {
		h.Set(k, v)
	}
	return GenerateContentConfig(&genai.GenerateContentConfig{HTTPOptions: &genai.HTTPOptions{Headers: h}})
}

func TestFakeSuccess(t *testing.T) {
	s := fpt.Start(t, fakeprovider.Options{}, FakeDialect())
	c := fakeClient(t, s.BaseURL(Name))
	id := fpt.FindRequest(t, s.Plan(), "gem-ok", fakeprovider.FaultNone)
	want := s.PlannedUsage(Name, id)

	t.Run("non-streaming", func(t *testing.T) {
		resp, err := c.Models.GenerateContent(fpt.AttemptCtx(t), fakeModel, genai.Text("Hello"), fakeConfig(id, 0))
		require.NoError(t, err)
		assert.Equal(t, want, UsageOf(resp))
		assert.Contains(t, resp.Text(), id)
		require.Len(t, resp.Candidates, 1)
		assert.Equal(t, genai.FinishReasonStop, resp.Candidates[0].FinishReason)
	})
	t.Run("streaming", func(t *testing.T) {
		var last *genai.GenerateContentResponse
		var text string
		for resp, err := range c.Models.GenerateContentStream(fpt.AttemptCtx(t), fakeModel, genai.Text("Hello"), fakeConfig(id, 1)) {
			require.NoError(t, err)
			last = resp
			text += resp.Text()
		}
		require.NotNil(t, last)
		assert.Equal(t, want, UsageOf(last))
		assert.Contains(t, text, id)
	})
	rt := s.Truth().Requests[id]
	assert.Equal(t, want, rt.Usage)
	assert.Equal(t, fakeModel, rt.Model)
	assert.Equal(t, Name, rt.Provider)
}

func TestFakeFaults(t *testing.T) {
	s := fpt.Start(t, fakeprovider.Options{}, FakeDialect())
	c := fakeClient(t, s.BaseURL(Name))
	tests := []struct {
		fault  fakeprovider.Fault
		status int
		code   string
	}{
		{fakeprovider.FaultRateLimit, http.StatusTooManyRequests, "RESOURCE_EXHAUSTED"},
		{fakeprovider.FaultOverload, http.StatusServiceUnavailable, "UNAVAILABLE"},
		{fakeprovider.FaultServerError, http.StatusInternalServerError, "INTERNAL"},
		{fakeprovider.FaultBadRequest, http.StatusBadRequest, "INVALID_ARGUMENT"},
	}
	for _, tt := range tests {
		t.Run(string(tt.fault), func(t *testing.T) {
			id := fpt.FindRequest(t, s.Plan(), "gem-"+string(tt.fault), tt.fault)
			_, err := c.Models.GenerateContent(fpt.AttemptCtx(t), fakeModel, genai.Text("Hello"), fakeConfig(id, 0))
			var ge genai.APIError
			require.ErrorAs(t, err, &ge)
			assert.Equal(t, tt.status, ge.Code)
			assert.Equal(t, tt.code, ge.Status)
			if tt.fault == fakeprovider.FaultRateLimit {
				require.Len(t, ge.Details, 1)
				assert.Equal(t, "type.googleapis.com/google.rpc.RetryInfo", ge.Details[0]["@type"])
				d := s.Plan().Decide(id, 0).RetryAfter
				assert.Equal(t, fmt.Sprintf("%.3fs", d.Seconds()), ge.Details[0]["retryDelay"])
			}
			assert.Equal(t, tt.fault, s.Truth().Requests[id].Attempts[0].Outcome)
		})
	}

	t.Run("billed timeout", func(t *testing.T) {
		id := fpt.FindRequest(t, s.Plan(), "gem-stall", fakeprovider.FaultBilledTimeout)
		billed := s.PlannedUsage(Name, id)
		billed.OutputTokens = fakeprovider.StalledOutputTokens
		ctx, cancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
		defer cancel()
		var last *genai.GenerateContentResponse
		var streamErr error
		for resp, err := range c.Models.GenerateContentStream(ctx, fakeModel, genai.Text("Hello"), fakeConfig(id, 0)) {
			if err != nil {
				streamErr = err
				break
			}
			last = resp
		}
		require.ErrorIs(t, streamErr, context.DeadlineExceeded)
		require.NotNil(t, last, "the first chunk arrives before the stall")
		assert.Equal(t, billed, UsageOf(last))
		rt := s.Truth().Requests[id]
		assert.Equal(t, fakeprovider.FaultBilledTimeout, rt.Attempts[0].Outcome)
		assert.Equal(t, billed, rt.Billed)
	})
}

// Every chunk carries the running usage: all a broken stream billed is
// observable, and the client counts it (StreamUsage). At the server's
// root, the API's own paths.
func TestFakeBrokenStream(t *testing.T) {
	s := fpt.Listen(t, fakeprovider.Options{Seed: 9, Mix: fakeprovider.Mix{RateLimit: 0.2, BrokenStream: 0.5}}, FakeDialect())
	p := s.Plan()
	id := fpt.FindRequest(t, p, "broken", fakeprovider.FaultBrokenStream)
	c := fakeClient(t, s.URL())
	var u StreamUsage
	var streamErr error
	for resp, err := range c.Models.GenerateContentStream(context.Background(), fakeModel, genai.Text("hi"), fakeConfig(id, 0)) {
		if err != nil {
			streamErr = err
			break
		}
		u.Observe(resp)
	}
	require.Error(t, streamErr)
	a := s.Truth().Requests[id].Attempts[0]
	assert.Equal(t, fakeprovider.FaultBrokenStream, a.Outcome)
	full := s.PlannedUsage(Name, id)
	assert.Equal(t, full.InputTokens, a.Billed.InputTokens)
	assert.Equal(t, p.BreakAfter(id, 0, full.OutputTokens), a.Billed.OutputTokens)
	assert.Equal(t, events.Usage{}, a.Unobservable)
	assert.Equal(t, a.Billed, u.Usage(), "what the client counted is what was billed")
}

// The dialect's Sim drives the SDK against the fake provider.
func TestFakeSimCaller(t *testing.T) { fpt.CheckSim(t, FakeDialect()) }
