package gateway

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/guard"
)

// A retryable failure is retried; the client gets the successful answer,
// and one event per attempt shares the request ID it is told.
func TestRetriedUntilSuccess(t *testing.T) {
	up := startScripted(t,
		reply(429, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, "Retry-After-Ms", "5", "Request-Id", "req_429"),
		reply(200, anthropicOK, "Request-Id", "req_ok"))
	h := newHarness(t, up.srv.URL, nil)
	resp := h.post("/v1/messages", anthropicBody, "X-Api-Key", "sk-ant-test", HeaderSessionID, "sess-a")
	body, err := read(resp)
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
	assert.JSONEq(t, anthropicOK, body)
	reqID := resp.Header.Get(HeaderRequestID)
	require.NoError(t, events.ValidateID("request_id", reqID))

	evs := h.events()
	require.Len(t, evs, 2)
	assert.Equal(t, events.KindRateLimit, evs[0].Error.Kind)
	assert.Equal(t, "req_429", evs[0].ProviderRequestID)
	assert.False(t, evs[0].Final)
	assert.Equal(t, events.OutcomeSuccess, evs[1].Outcome)
	assert.Equal(t, events.Usage{InputTokens: 100, OutputTokens: 5, CacheReadInputTokens: 90}, evs[1].Usage, "Anthropic's input plus the cache")
	assert.Equal(t, "req_ok", evs[1].ProviderRequestID)
	for i, ev := range evs {
		assert.Equal(t, i, ev.Attempt)
		assert.Equal(t, reqID, ev.RequestID)
		assert.Equal(t, "sess-a", ev.SessionID)
		assert.Equal(t, anthropic, ev.Provider)
		assert.Equal(t, "claude-test", ev.Model)
	}
	reqs := up.requests()
	require.Len(t, reqs, 2)
	for _, r := range reqs {
		assert.Equal(t, "sk-ant-test", r.Header.Get("X-Api-Key"), "credentials pass through")
		assert.Empty(t, r.Header.Get(HeaderSessionID), "no ledger header goes upstream unless asked")
		assert.Equal(t, "/v1/messages", r.URL.Path)
	}
}

// After the last attempt the client gets the provider's own status,
// headers and body.
func TestLastFailureRelayed(t *testing.T) {
	up := startScripted(t, reply(529, overloaded, "Request-Id", "req_529", "X-Custom", "kept"))
	h := newHarness(t, up.srv.URL, nil)
	resp := h.post("/v1/messages", anthropicBody, "X-Api-Key", "k")
	body, _ := read(resp)
	assert.Equal(t, 529, resp.StatusCode)
	assert.JSONEq(t, overloaded, body)
	assert.Equal(t, "kept", resp.Header.Get("X-Custom"))
	assert.Empty(t, resp.Header.Get(HeaderGatewayError), "the provider's answer, not the gateway's")
	assert.NotEmpty(t, resp.Header.Get(HeaderRequestID))
	evs := h.events()
	require.Len(t, evs, 3)
	assert.True(t, evs[2].Final)
	assert.Equal(t, events.KindOverloaded, evs[2].Error.Kind)
	assert.Len(t, up.requests(), 3)
}

// A non-retryable answer is relayed at once.
func TestNonRetryableNotRetried(t *testing.T) {
	up := startScripted(t, reply(400, `{"error":{"message":"bad","type":"invalid_request_error","param":null,"code":null}}`))
	h := newHarness(t, up.srv.URL, nil)
	resp := h.post("/v1/chat/completions", `{"model":"gpt-test","messages":[]}`, "Authorization", "Bearer k")
	assert.Equal(t, 400, resp.StatusCode)
	require.Len(t, h.events(), 1)
	assert.Equal(t, events.KindClient, h.events()[0].Error.Kind)
}

// A stream goes to the client event by event, with its usage accounted:
// message_start's input and cache, message_delta's cumulative output.
func TestStreamRelayedAndAccounted(t *testing.T) {
	up := startScripted(t, sse(false, evStart, evDelta, evMsgDelta, evStop))
	h := newHarness(t, up.srv.URL, nil)
	resp := h.post("/v1/messages", anthropicStreamBody, "X-Api-Key", "k")
	body, err := read(resp)
	require.NoError(t, err)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	assert.Equal(t, evStart+"\n\n"+evDelta+"\n\n"+evMsgDelta+"\n\n"+evStop+"\n\n", body, "byte for byte")
	evs := h.events()
	require.Len(t, evs, 1)
	assert.Equal(t, events.OutcomeSuccess, evs[0].Outcome)
	assert.Equal(t, events.Usage{InputTokens: 120, OutputTokens: 42, CacheReadInputTokens: 100}, evs[0].Usage)
}

// A stream that fails before its first event reached the client is
// retried.
func TestStreamFailureBeforeFirstByteRetried(t *testing.T) {
	up := startScripted(t, sse(true), sse(false, evStart, evMsgDelta, evStop))
	h := newHarness(t, up.srv.URL, nil)
	resp := h.post("/v1/messages", anthropicStreamBody, "X-Api-Key", "k")
	body, err := read(resp)
	require.NoError(t, err)
	assert.Contains(t, body, "message_stop")
	evs := h.events()
	require.Len(t, evs, 2)
	assert.Equal(t, events.KindConnection, evs[0].Error.Kind)
	assert.True(t, evs[0].Error.Retryable)
	assert.Equal(t, events.OutcomeSuccess, evs[1].Outcome)
}

// After the first byte, a broken stream ends the call: the client's stream
// is cut, and the final event has the input and the output reported.
func TestStreamBrokenAfterFirstByteEndsTheCall(t *testing.T) {
	up := startScripted(t, sse(true, evStart, evDelta), sse(false, evStart, evStop))
	h := newHarness(t, up.srv.URL, nil)
	resp := h.post("/v1/messages", anthropicStreamBody, "X-Api-Key", "k")
	body, err := read(resp)
	require.Error(t, err, "the client's stream is cut, not ended")
	assert.Contains(t, body, "content_block_delta")
	evs := h.events()
	require.Len(t, evs, 1, "no retry after the first byte")
	ev := evs[0]
	assert.True(t, ev.Final)
	assert.Equal(t, events.KindConnection, ev.Error.Kind)
	assert.False(t, ev.Error.Retryable, "the gateway could not retry it")
	assert.Equal(t, events.Usage{InputTokens: 120, OutputTokens: 1, CacheReadInputTokens: 100}, ev.Usage)
	assert.Len(t, up.requests(), 1)
}

// An error event that comes first is retried; after the last attempt the
// stream is relayed as the provider sent it.
func TestFirstEventErrorRetriedThenRelayed(t *testing.T) {
	up := startScripted(t, sse(false, evOverloaded))
	h := newHarness(t, up.srv.URL, nil)
	resp := h.post("/v1/messages", anthropicStreamBody, "X-Api-Key", "k")
	body, err := read(resp)
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, evOverloaded+"\n\n", body)
	evs := h.events()
	require.Len(t, evs, 3)
	for _, ev := range evs {
		assert.Equal(t, events.KindOverloaded, ev.Error.Kind)
		assert.Zero(t, ev.Error.Status)
	}
}

// An error event in the middle of a stream is relayed with the rest of
// the stream, which ends normally; the call ends with that error.
func TestErrorEventMidStream(t *testing.T) {
	up := startScripted(t, sse(false, evStart, evOverloaded))
	h := newHarness(t, up.srv.URL, nil)
	resp := h.post("/v1/messages", anthropicStreamBody, "X-Api-Key", "k")
	body, err := read(resp)
	require.NoError(t, err, "the stream ends as the provider ended it")
	assert.True(t, strings.HasSuffix(body, evOverloaded+"\n\n"))
	evs := h.events()
	require.Len(t, evs, 1)
	assert.Equal(t, events.KindOverloaded, evs[0].Error.Kind)
	assert.False(t, evs[0].Error.Retryable)
	assert.Equal(t, int64(120), evs[0].Usage.InputTokens)
}

// chunk is an OpenAI chat chunk event with content c ("" for none).
func chunk(c string) string {
	delta := `{}`
	if c != "" {
		delta = `{"content":` + strconv.Quote(c) + `}`
	}
	return `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}],"usage":null}`
}

const usageChunk = `data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":300,"completion_tokens":2,"total_tokens":302,"prompt_tokens_details":{"cached_tokens":100}}}`

// The gateway asks an OpenAI chat stream for its usage when the client did
// not, and keeps that chunk from the client.
func TestChatStreamUsageInjected(t *testing.T) {
	up := startScripted(t, sse(false, chunk("He"), chunk("llo"), usageChunk, "data: [DONE]"))
	h := newHarness(t, up.srv.URL, nil)
	resp := h.post("/v1/chat/completions", `{"model":"gpt-test","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer k")
	body, err := read(resp)
	require.NoError(t, err)
	assert.NotContains(t, body, "prompt_tokens", "the usage chunk was the gateway's")
	assert.Contains(t, body, "[DONE]")
	var sent struct {
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
		Model string `json:"model"`
	}
	require.NoError(t, json.NewDecoder(up.requests()[0].Body).Decode(&sent))
	assert.True(t, sent.StreamOptions.IncludeUsage)
	assert.Equal(t, "gpt-test", sent.Model)
	evs := h.events()
	require.Len(t, evs, 1)
	assert.Equal(t, events.Usage{InputTokens: 300, OutputTokens: 2, CacheReadInputTokens: 100}, evs[0].Usage)

	// A client that asked keeps its chunk.
	h2 := newHarness(t, up.srv.URL, nil)
	resp = h2.post("/v1/chat/completions", `{"model":"gpt-test","stream":true,"stream_options":{"include_usage":true},"messages":[]}`, "Authorization", "Bearer k")
	body, err = read(resp)
	require.NoError(t, err)
	assert.Contains(t, body, "prompt_tokens")
}

// A chat stream broken before its usage chunk records the output it
// streamed (one token per content chunk); its input is not knowable.
func TestChatStreamBrokenBeforeUsage(t *testing.T) {
	up := startScripted(t, sse(true, chunk(""), chunk("a"), chunk("b"), chunk("c")))
	h := newHarness(t, up.srv.URL, nil)
	resp := h.post("/v1/chat/completions", `{"model":"gpt-test","stream":true,"messages":[]}`, "Authorization", "Bearer k")
	_, err := read(resp)
	require.Error(t, err)
	evs := h.events()
	require.Len(t, evs, 1)
	assert.Equal(t, events.Usage{OutputTokens: 3}, evs[0].Usage)
}

// An open breaker is answered 503 with retry-after, in the provider's
// error format, marked as the gateway's.
func TestCircuitOpen(t *testing.T) {
	up := startScripted(t, reply(500, `{"error":{"code":500,"message":"boom","status":"INTERNAL"}}`))
	now := time.Now()
	h := newHarness(t, up.srv.URL, func(c *Config) {
		g, err := breaker.NewGroup(breaker.Config{FailureThreshold: 1, Cooldown: 30 * time.Second, Now: func() time.Time { return now }})
		require.NoError(t, err)
		c.Retry.Breakers = g
		c.Now = func() time.Time { return now.Add(10 * time.Second) }
	})
	path := "/v1beta/models/gemini-test:generateContent"
	resp := h.post(path, `{"contents":[{"parts":[{"text":"hi"}]}]}`, "X-Goog-Api-Key", "k")
	assert.Equal(t, 503, resp.StatusCode, "the breaker opened after the first failure and refused the retry")
	assert.Equal(t, "20", resp.Header.Get("Retry-After"))
	assert.Equal(t, "20000", resp.Header.Get("Retry-After-Ms"))
	assert.Equal(t, "circuit_open", resp.Header.Get(HeaderGatewayError))
	body, _ := read(resp)
	var ge struct {
		Error struct {
			Code   int    `json:"code"`
			Status string `json:"status"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &ge), body)
	assert.Equal(t, 503, ge.Error.Code)
	assert.Equal(t, "UNAVAILABLE", ge.Error.Status)
	evs := h.events()
	require.Len(t, evs, 2)
	assert.Equal(t, events.KindCircuitOpen, evs[1].Error.Kind)
	assert.Equal(t, "gemini-test", evs[1].Model)
	assert.Len(t, up.requests(), 1)
}

// A call that the upstream's rate limit cannot admit in time (here 1
// request a minute, and a hint cap of 1 s) is answered 429 with
// retry-after, in the provider's format, without reaching the upstream;
// its event is a rate_limit with status 0.
func TestRateLimitRefused(t *testing.T) {
	up := startScripted(t, reply(200, `{"id":"msg_1","type":"message","usage":{"input_tokens":10,"output_tokens":2}}`))
	h := newHarness(t, up.srv.URL, func(c *Config) {
		gs, err := guard.New(guard.Config{RateLimits: true, Limits: map[string]guard.Limits{"anthropic/claude-x": {guard.Requests: 1}}})
		require.NoError(t, err)
		c.Retry.Guards = gs
	})
	var resp *http.Response
	for range 2 {
		if resp = h.post("/v1/messages", `{"model":"claude-x","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, "X-Api-Key", "k"); resp.StatusCode == 429 {
			break
		}
	}
	require.Equal(t, 429, resp.StatusCode)
	assert.Equal(t, "rate_limited", resp.Header.Get(HeaderGatewayError))
	assert.NotEmpty(t, resp.Header.Get("Retry-After"))
	body, _ := read(resp)
	assert.Contains(t, body, `"rate_limit_error"`)
	assert.Contains(t, body, "requests")
	evs := h.events()
	last := evs[len(evs)-1]
	require.NotNil(t, last.Error)
	assert.Equal(t, events.KindRateLimit, last.Error.Kind)
	assert.Zero(t, last.Error.Status, "no attempt reached the provider")
	assert.True(t, last.Final)
	assert.Len(t, up.requests(), len(evs)-1, "only the admitted call reached the upstream")
}

// A hanging upstream is ended by the attempt timeout and retried; after
// the last attempt the client gets 504 from the gateway.
func TestAttemptTimeout(t *testing.T) {
	hang := func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
	up := startScripted(t, hang)
	h := newHarness(t, up.srv.URL, func(c *Config) {
		c.AttemptTimeout = 50 * time.Millisecond
		c.Retry.Policy.MaxRetries = 1
	})
	resp := h.post("/v1/embeddings", `{"model":"e","input":"x"}`, "Authorization", "Bearer k")
	assert.Equal(t, 504, resp.StatusCode)
	assert.Equal(t, "upstream_timeout", resp.Header.Get(HeaderGatewayError))
	evs := h.events()
	require.Len(t, evs, 2)
	for _, ev := range evs {
		assert.Equal(t, events.KindTimeout, ev.Error.Kind)
		assert.True(t, ev.Error.Retryable)
	}
}

// A stream that goes silent after its first event is ended by the idle
// timeout, with a final event.
func TestStreamIdleTimeout(t *testing.T) {
	stall := func(w http.ResponseWriter, r *http.Request) {
		sse(false, evStart)(w, r)
		<-r.Context().Done()
	}
	up := startScripted(t, stall)
	h := newHarness(t, up.srv.URL, func(c *Config) { c.StreamIdleTimeout = 50 * time.Millisecond })
	resp := h.post("/v1/messages", anthropicStreamBody, "X-Api-Key", "k")
	_, err := read(resp)
	require.Error(t, err)
	evs := h.events()
	require.Len(t, evs, 1)
	assert.Equal(t, events.KindTimeout, evs[0].Error.Kind)
	assert.Contains(t, evs[0].Error.Message, "stream idle timeout")
	assert.Equal(t, int64(120), evs[0].Usage.InputTokens, "the input message_start billed")
}

// A client that leaves as soon as the stream's last event reaches it
// cancels the request, and so the read of the upstream's last bytes; the
// call ends as the upstream ended it all the same:
//   - after the terminal event (the SDKs close on [DONE] or message_stop)
//     it succeeded (it was recorded canceled, under load about one run in
//     14 of the e2e test of the Go SDKs);
//   - after an error event (the SDKs stop there) it is the upstream's
//     failure, which the breaker and the ledger must see, not the
//     client's cancellation (recorded canceled in about one e2e run in 20
//     of the compatible presets' test).
func TestClientLeavingAfterTheLastEvent(t *testing.T) {
	tests := []struct {
		name     string
		events   []string
		lastLine string
		wantKind events.ErrorKind // "" for a success
	}{
		{"after the end, a success", []string{evStart, evDelta, evStop}, "message_stop", ""},
		{"after an error event, the upstream's error", []string{evStart, evDelta, evOverloaded}, "overloaded_error", events.KindOverloaded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hold := func(w http.ResponseWriter, r *http.Request) {
				sse(false, tt.events...)(w, r)
				<-r.Context().Done() // the upstream's end never comes before the client leaves
			}
			up := startScripted(t, hold)
			h := newHarness(t, up.srv.URL, nil)
			resp := h.post("/v1/messages", anthropicStreamBody, "X-Api-Key", "k")
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() && !strings.Contains(sc.Text(), tt.lastLine) {
			}
			require.NoError(t, resp.Body.Close()) // leaves at once, as an SDK does
			require.Eventually(t, func() bool { return len(h.events()) == 1 }, 10*time.Second, 5*time.Millisecond, "the call's event")
			ev := h.events()[0]
			assert.True(t, ev.Final)
			if tt.wantKind == "" {
				assert.Nil(t, ev.Error, "a success, not %+v", ev.Error)
				assert.Equal(t, int64(120), ev.Usage.InputTokens)
				return
			}
			require.NotNil(t, ev.Error)
			assert.Equal(t, tt.wantKind, ev.Error.Kind)
		})
	}
}

// An upstream that cannot be reached is retried, then answered 502.
func TestUpstreamUnreachable(t *testing.T) {
	h := newHarness(t, "http://127.0.0.1:1", nil)
	resp := h.post("/v1/responses", `{"model":"gpt-test","input":"hi"}`, "Authorization", "Bearer k")
	assert.Equal(t, 502, resp.StatusCode)
	assert.Equal(t, "upstream_unreachable", resp.Header.Get(HeaderGatewayError))
	evs := h.events()
	require.Len(t, evs, 3)
	assert.Equal(t, events.KindConnection, evs[0].Error.Kind)
}

// Bad IDs and bodies over the limit are refused before any attempt.
func TestRefusedRequests(t *testing.T) {
	up := startScripted(t, reply(200, anthropicOK))
	h := newHarness(t, up.srv.URL, func(c *Config) { c.MaxRequestBytes = 200 })
	resp := h.post("/v1/messages", anthropicBody, HeaderSessionID, "bad.session")
	assert.Equal(t, 400, resp.StatusCode)
	body, _ := read(resp)
	assert.Contains(t, body, HeaderSessionID)
	assert.Contains(t, body, "invalid_request_error")

	resp = h.post("/v1/messages", anthropicBody, HeaderRequestID, strings.Repeat("x", 200))
	assert.Equal(t, 400, resp.StatusCode)
	body, _ = read(resp)
	assert.Contains(t, body, HeaderRequestID)

	resp = h.post("/v1/messages", strings.Repeat(" ", 300)+anthropicBody)
	assert.Equal(t, 413, resp.StatusCode)
	assert.Equal(t, "too_large", resp.Header.Get(HeaderGatewayError))
	assert.Empty(t, h.events())
	assert.Empty(t, up.requests())
}

// A client that retries with the same request ID continues the request's
// attempt numbering; an idempotency key names the request too.
func TestClientRetriesContinueTheNumbering(t *testing.T) {
	up := startScripted(t, reply(500, overloaded))
	h := newHarness(t, up.srv.URL, nil)
	for range 2 {
		resp := h.post("/v1/messages", anthropicBody, "X-Api-Key", "k", HeaderRequestID, "client-req-1")
		assert.Equal(t, 500, resp.StatusCode)
		assert.Equal(t, "client-req-1", resp.Header.Get(HeaderRequestID))
	}
	resp := h.post("/v1/messages", anthropicBody, "X-Api-Key", "k", "Idempotency-Key", "stainless-node-retry-3f1c")
	assert.Equal(t, "stainless-node-retry-3f1c", resp.Header.Get(HeaderRequestID))
	resp = h.post("/v1/messages", anthropicBody, "X-Api-Key", "k", "Idempotency-Key", "stainless-node-retry-3f1c")
	assert.Equal(t, "stainless-node-retry-3f1c", resp.Header.Get(HeaderRequestID))

	var numbers []int
	var idem []int
	for _, ev := range h.events() {
		switch ev.RequestID {
		case "client-req-1":
			numbers = append(numbers, ev.Attempt)
		case "stainless-node-retry-3f1c":
			idem = append(idem, ev.Attempt)
		}
	}
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5}, numbers)
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5}, idem)

	// An idempotency key that is no valid ID is named by its digest.
	resp = h.post("/v1/messages", anthropicBody, "X-Api-Key", "k", "Idempotency-Key", "key with spaces/and.dots")
	id := resp.Header.Get(HeaderRequestID)
	assert.True(t, strings.HasPrefix(id, "idem-"), id)
	assert.Equal(t, id, idempotencyRequestID("key with spaces/and.dots"))
}

// Unused attempt numbers are given back, so the numbering stays
// contiguous across a client's retries.
func TestUnusedAttemptNumbersGivenBack(t *testing.T) {
	up := startScripted(t, reply(400, `{"type":"error","error":{"type":"invalid_request_error","message":"no"}}`))
	h := newHarness(t, up.srv.URL, nil)
	for range 3 {
		h.post("/v1/messages", anthropicBody, "X-Api-Key", "k", HeaderRequestID, "r-contiguous")
	}
	var numbers []int
	for _, ev := range h.events() {
		numbers = append(numbers, ev.Attempt)
	}
	assert.Equal(t, []int{0, 1, 2}, numbers)
}

// With the ledger headers forwarded the upstream learns the attempt.
func TestForwardLedgerHeaders(t *testing.T) {
	up := startScripted(t, reply(503, overloaded), reply(200, anthropicOK))
	h := newHarness(t, up.srv.URL, func(c *Config) { c.ForwardLedgerHeaders = true })
	h.post("/v1/messages", anthropicBody, "X-Api-Key", "k", HeaderSessionID, "s-fwd", HeaderRequestID, "r-fwd")
	reqs := up.requests()
	require.Len(t, reqs, 2)
	for i, r := range reqs {
		assert.Equal(t, "s-fwd", r.Header.Get(HeaderSessionID))
		assert.Equal(t, "r-fwd", r.Header.Get(HeaderRequestID))
		assert.Equal(t, strconv.Itoa(i), r.Header.Get(HeaderAttempt))
	}
}

// Other paths go through unchanged, unaccounted, logged once per path.
func TestPassthrough(t *testing.T) {
	up := startScripted(t, reply(200, `{"data":[]}`))
	h := newHarness(t, up.srv.URL, nil)
	for range 2 {
		req, err := http.NewRequest(http.MethodGet, h.url+"/v1/models?limit=2", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer k")
		req.Header.Set(HeaderSessionID, "s")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := read(resp)
		resp.Body.Close()
		assert.JSONEq(t, `{"data":[]}`, body)
	}
	reqs := up.requests()
	require.Len(t, reqs, 2)
	assert.Equal(t, "limit=2", reqs[0].URL.RawQuery)
	assert.Equal(t, "Bearer k", reqs[0].Header.Get("Authorization"))
	assert.Empty(t, reqs[0].Header.Get(HeaderSessionID))
	assert.Empty(t, h.events())
	assert.Equal(t, 1, strings.Count(h.logs.String(), "not accounted"), h.logs.String())
}

// A stream is not buffered: the client has the first event while the
// upstream still holds back the rest.
func TestStreamNotBuffered(t *testing.T) {
	release := make(chan struct{})
	step := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		_, _ = io.WriteString(w, evStart+"\n\n")
		_ = rc.Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, evMsgDelta+"\n\n"+evStop+"\n\n")
	}
	up := startScripted(t, step)
	h := newHarness(t, up.srv.URL, nil)
	resp := h.post("/v1/messages", anthropicStreamBody, "X-Api-Key", "k")
	first := make(chan string, 1)
	rd := bufio.NewReader(resp.Body)
	go func() {
		var ev strings.Builder
		for {
			line, err := rd.ReadString('\n')
			ev.WriteString(line)
			if err != nil || line == "\n" {
				first <- ev.String()
				return
			}
		}
	}()
	select {
	case ev := <-first:
		assert.Equal(t, evStart+"\n\n", ev)
	case <-time.After(30 * time.Second):
		t.Fatal("the first event did not reach the client while the upstream held the rest")
	}
	close(release)
	rest, err := io.ReadAll(rd)
	require.NoError(t, err)
	assert.Equal(t, evMsgDelta+"\n\n"+evStop+"\n\n", string(rest))
}

// A client that goes away mid-stream ends the call: the upstream request
// is canceled, and the final event (canceled) has what was billed so far.
func TestClientGoneMidStream(t *testing.T) {
	upstreamGone := make(chan struct{})
	step := func(w http.ResponseWriter, r *http.Request) {
		sse(false, evStart)(w, r)
		<-r.Context().Done()
		close(upstreamGone)
	}
	up := startScripted(t, step)
	h := newHarness(t, up.srv.URL, nil)
	resp := h.post("/v1/messages", anthropicStreamBody, "X-Api-Key", "k")
	rd := bufio.NewReader(resp.Body)
	for {
		line, err := rd.ReadString('\n')
		require.NoError(t, err)
		if line == "\n" {
			break
		}
	}
	resp.Body.Close()
	select {
	case <-upstreamGone:
	case <-time.After(30 * time.Second):
		t.Fatal("the upstream request was not canceled")
	}
	require.Eventually(t, func() bool { return h.sink.Len() == 1 }, 30*time.Second, 5*time.Millisecond)
	ev := h.events()[0]
	assert.Equal(t, events.KindCanceled, ev.Error.Kind)
	assert.True(t, ev.Final)
	assert.Equal(t, int64(120), ev.Usage.InputTokens)
}

// The gateway records what the provider reports beside the four counts
// (issue 19): the reasoning and 1-hour cache-write subsets, clamped within
// their wholes, and the service tier, from a whole body and from a stream.
func TestSubsetsAndServiceTierRecorded(t *testing.T) {
	const whole = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":"end_turn",` +
		`"usage":{"input_tokens":10,"output_tokens":50,"cache_read_input_tokens":0,"cache_creation_input_tokens":300,` +
		`"cache_creation":{"ephemeral_5m_input_tokens":100,"ephemeral_1h_input_tokens":200},"output_tokens_details":{"thinking_tokens":40},"service_tier":"priority"}}`
	start := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{\"input_tokens\":20,\"output_tokens\":1," +
		"\"cache_creation_input_tokens\":8,\"cache_creation\":{\"ephemeral_5m_input_tokens\":0,\"ephemeral_1h_input_tokens\":8},\"service_tier\":\"Standard\"}}}"
	delta := "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":30,\"output_tokens_details\":{\"thinking_tokens\":99}}}"
	for _, tc := range []struct {
		name     string
		up       *scripted
		body     string
		want     events.Usage
		wantTier string
	}{
		{"whole body", startScripted(t, reply(200, whole)), anthropicBody,
			events.Usage{InputTokens: 310, OutputTokens: 50, CacheCreationInputTokens: 300, CacheCreation1hInputTokens: 200, ReasoningTokens: 40}, "priority"},
		{"stream, thinking above the output cut to it", startScripted(t, sse(false, start, delta, evStop)), anthropicStreamBody,
			events.Usage{InputTokens: 28, OutputTokens: 30, CacheCreationInputTokens: 8, CacheCreation1hInputTokens: 8, ReasoningTokens: 30}, "standard"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.up.srv.URL, nil)
			_, err := read(h.post("/v1/messages", tc.body, "X-Api-Key", "k"))
			require.NoError(t, err)
			evs := h.events()
			require.Len(t, evs, 1)
			assert.Equal(t, tc.want, evs[0].Usage)
			assert.Equal(t, tc.wantTier, evs[0].ServiceTier)
			require.NoError(t, evs[0].Validate())
		})
	}
}
