package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger"
	"github.com/agentledger/ledger/gateway"
	"github.com/agentledger/ledger/ledgertest"
)

// Labels through the gateway, with a real HTTP client: the request's
// X-Ledger-Labels over the gateway's WithLabels reach the event on the
// stream; a bad header is answered 400 naming the header, the key and
// the rule, and publishes nothing.
func TestLabelsHeaderReachTheStream(t *testing.T) {
	l := ledgertest.Start(t, ledgertest.WithoutAggregator())
	up := ledgertest.FakeOpenAI(t, ledgertest.Succeed(ledger.Usage{InputTokens: 30, OutputTokens: 4}))
	gw := ledgertest.StartGateway(t, l, ledgertest.GatewayUpstream(up),
		gateway.WithLabels(ledger.Labels{"team": "gw", "env": "prod"}),
		gateway.WithRetryPolicy(ledger.Policy{MaxRetries: 1, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond, HintCap: time.Second}))

	post := func(labels string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, gw.URL()+"/v1/chat/completions",
			strings.NewReader(`{"model":"gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer test")
		req.Header.Set("X-Ledger-Labels", labels)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}

	status, body := post("Team=search")
	assert.Equal(t, http.StatusBadRequest, status)
	for _, w := range []string{"X-Ledger-Labels", `labels[\"Team\"]`, "key must be a lower-case letter"} {
		assert.Contains(t, body, w)
	}
	assert.Zero(t, up.Requests(), "no upstream call")

	status, body = post("team=search, user=u-42")
	require.Equal(t, http.StatusOK, status, body)

	c, err := l.Connect(t).JetStream().OrderedConsumer(t.Context(), "LEDGER_ATTEMPTS", jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	msg, err := c.Next()
	require.NoError(t, err)
	var ev struct {
		Labels map[string]string `json:"labels"`
	}
	require.NoError(t, json.Unmarshal(msg.Data(), &ev))
	assert.Equal(t, map[string]string{"team": "search", "env": "prod", "user": "u-42"}, ev.Labels)
	info, err := c.Info(t.Context())
	require.NoError(t, err)
	assert.Zero(t, info.NumPending, "one event: the refused call published none")
}
