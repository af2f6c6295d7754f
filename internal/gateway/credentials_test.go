package gateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
)

// leakKey is a credential recognisable wherever it leaks.
const leakKey = "sk-LEAKCHECK-7f3a9c2e51d84b06"

// The client's credentials reach the upstream and nowhere else: not the
// events (even when the provider's error message quotes the key, or a
// transport error shows the URL with a key query parameter), not the
// logs at debug level.
func TestCredentialsNeverInLogsOrEvents(t *testing.T) {
	echo := func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("X-Api-Key") + r.Header.Get("Authorization") + r.Header.Get("X-Goog-Api-Key") + r.URL.Query().Get("key")
		reply(401, `{"type":"error","error":{"type":"authentication_error","message":"invalid key `+key+`"},"error_message":"`+key+`"}`)(w, r)
	}
	up := startScripted(t, echo)
	h := newHarness(t, up.srv.URL, nil)
	down := newHarness(t, "http://127.0.0.1:1", nil)
	for _, hh := range []*harness{h, down} {
		hh.post("/v1/messages", anthropicBody, "X-Api-Key", leakKey)
		hh.post("/v1/chat/completions", `{"model":"m","messages":[]}`, "Authorization", "Bearer "+leakKey)
		hh.post("/v1beta/models/g:generateContent", `{"contents":[]}`, "X-Goog-Api-Key", leakKey)
		hh.post("/v1beta/models/g:streamGenerateContent?alt=sse&key="+leakKey, `{"contents":[]}`)
		resp := hh.post("/v1beta/files?key="+leakKey, `{}`) // proxied through
		_, _ = read(resp)
	}
	for _, r := range up.requests() {
		got := r.Header.Get("X-Api-Key") + r.Header.Get("Authorization") + r.Header.Get("X-Goog-Api-Key") + r.URL.Query().Get("key")
		assert.Contains(t, got, leakKey, "the upstream gets the credential")
	}
	for name, hh := range map[string]*harness{"reachable": h, "unreachable": down} {
		evs := hh.events()
		require.NotEmpty(t, evs, name)
		data, err := json.Marshal(evs)
		require.NoError(t, err)
		assert.NotContains(t, string(data), leakKey, "%s: events", name)
		assert.NotContains(t, string(data), "LEAKCHECK", "%s: events", name)
		logs := hh.logs.String()
		require.NotEmpty(t, logs)
		assert.NotContains(t, logs, "LEAKCHECK", "%s: logs", name)
	}
	var sawRedacted bool
	for _, ev := range h.events() {
		sawRedacted = sawRedacted || (ev.Error != nil && strings.Contains(ev.Error.Message, redacted))
		assert.Equal(t, events.KindAuth, ev.Error.Kind)
	}
	assert.True(t, sawRedacted, "the provider's message quoting the key is kept, redacted")
}
