package anthropic

import (
	"context"
	"net/http"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/provider/providertest"
)

func TestUsageOfRealResponse(t *testing.T) {
	tests := []struct {
		name  string
		usage string
		want  events.Usage
		tier  string
	}{
		{
			name:  "no cache",
			usage: `{"input_tokens":25,"output_tokens":7}`,
			want:  events.Usage{InputTokens: 25, OutputTokens: 7},
		},
		{
			name:  "cache read and creation are added to input",
			usage: `{"input_tokens":50,"output_tokens":12,"cache_read_input_tokens":1800,"cache_creation_input_tokens":248}`,
			want:  events.Usage{InputTokens: 2098, OutputTokens: 12, CacheReadInputTokens: 1800, CacheCreationInputTokens: 248},
		},
		{
			name: "the 1-hour cache write and thinking are subsets",
			usage: `{"input_tokens":50,"output_tokens":900,"cache_read_input_tokens":1000,"cache_creation_input_tokens":300,` +
				`"cache_creation":{"ephemeral_5m_input_tokens":100,"ephemeral_1h_input_tokens":200},"output_tokens_details":{"thinking_tokens":640},"service_tier":"priority"}`,
			want: events.Usage{InputTokens: 1350, OutputTokens: 900, CacheReadInputTokens: 1000, CacheCreationInputTokens: 300,
				CacheCreation1hInputTokens: 200, ReasoningTokens: 640},
			tier: "priority",
		},
		{
			name:  "null cache counts",
			usage: `{"input_tokens":3,"output_tokens":1,"cache_read_input_tokens":null,"cache_creation_input_tokens":null}`,
			want:  events.Usage{InputTokens: 3, OutputTokens: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := providertest.Start(t, providertest.Reply{
				Status: 200,
				Header: map[string]string{"Content-Type": "application/json", RequestIDHeader: "req_ok"},
				Body: `{"id":"msg_01","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"hi"}],` +
					`"stop_reason":"end_turn","stop_sequence":null,"usage":` + tt.usage + `}`,
			})
			client := newClient(t, s.URL)
			var res *http.Response
			msg, err := client.Messages.New(context.Background(), newParams(), option.WithResponseInto(&res))
			require.NoError(t, err)
			assert.Equal(t, tt.want, UsageOf(msg.Usage))
			assert.Equal(t, tt.tier, ServiceTierOf(msg.Usage))
			assert.Equal(t, "req_ok", RequestID(res.Header))
			assert.EqualValues(t, 1, s.Requests())
		})
	}
}

func TestStreamUsageOfCompleteStream(t *testing.T) {
	body := "event: message_start\n" +
		`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":40,"output_tokens":1,"cache_read_input_tokens":900,"cache_creation_input_tokens":60}}}` + "\n\n" +
		"event: content_block_start\n" +
		`data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
		"event: ping\ndata: {\"type\": \"ping\"}\n\n" +
		"event: content_block_delta\n" +
		`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}` + "\n\n" +
		"event: content_block_stop\n" +
		`data: {"type":"content_block_stop","index":0}` + "\n\n" +
		"event: message_delta\n" +
		`data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":37}}` + "\n\n" +
		"event: message_stop\n" +
		`data: {"type":"message_stop"}` + "\n\n"
	s := providertest.Start(t, providertest.Reply{Status: 200, Header: map[string]string{"Content-Type": "text/event-stream"}, Body: body})
	client := newClient(t, s.URL)

	stream := client.Messages.NewStreaming(context.Background(), newParams())
	var su StreamUsage
	var acc sdk.Message
	for stream.Next() {
		su.Observe(stream.Current())
		require.NoError(t, acc.Accumulate(stream.Current()))
	}
	require.NoError(t, stream.Err())
	require.NoError(t, stream.Close())

	want := events.Usage{InputTokens: 1000, OutputTokens: 37, CacheReadInputTokens: 900, CacheCreationInputTokens: 60}
	assert.Equal(t, want, su.Usage())
	assert.Equal(t, want, UsageOf(acc.Usage))
}

// TestStreamUsageDeltaOverrides covers a message_delta that carries input
// counts (server tools can add input while the message is generated):
// they replace message_start's, since every count is cumulative.
func TestStreamUsageDeltaOverrides(t *testing.T) {
	var start, delta sdk.MessageStreamEventUnion
	require.NoError(t, start.UnmarshalJSON([]byte(`{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"x","content":[],"usage":{"input_tokens":10,"output_tokens":1,"cache_read_input_tokens":5,"cache_creation_input_tokens":0}}}`)))
	require.NoError(t, delta.UnmarshalJSON([]byte(`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"input_tokens":30,"output_tokens":9,"cache_read_input_tokens":5}}`)))

	var su StreamUsage
	assert.True(t, su.Usage().IsZero(), "zero value")
	su.Observe(start)
	assert.Equal(t, events.Usage{InputTokens: 15, OutputTokens: 1, CacheReadInputTokens: 5}, su.Usage())
	su.Observe(delta)
	assert.Equal(t, events.Usage{InputTokens: 35, OutputTokens: 9, CacheReadInputTokens: 5}, su.Usage())
}

// TestStreamUsageSubsetsAndTier: the SDK's events carry the 1-hour cache
// write and the tier in message_start, the thinking part of the output in
// message_delta; StreamUsage reads them as ObserveRaw does the wire's.
func TestStreamUsageSubsetsAndTier(t *testing.T) {
	start := `{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"x","content":[],"usage":{"input_tokens":10,"output_tokens":1,` +
		`"cache_read_input_tokens":5,"cache_creation_input_tokens":40,"cache_creation":{"ephemeral_5m_input_tokens":15,"ephemeral_1h_input_tokens":25},"service_tier":"priority"}}}`
	delta := `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":90,"output_tokens_details":{"thinking_tokens":70}}}`
	var sdkUsage, raw StreamUsage
	for _, data := range []string{start, delta} {
		var ev sdk.MessageStreamEventUnion
		require.NoError(t, ev.UnmarshalJSON([]byte(data)))
		sdkUsage.Observe(ev)
		require.NoError(t, raw.ObserveRaw("", []byte(data)))
	}
	want := events.Usage{InputTokens: 55, OutputTokens: 90, CacheReadInputTokens: 5, CacheCreationInputTokens: 40, CacheCreation1hInputTokens: 25, ReasoningTokens: 70}
	assert.Equal(t, want, sdkUsage.Usage())
	assert.Equal(t, want, raw.Usage())
	assert.Equal(t, "priority", sdkUsage.ServiceTier())
	assert.Equal(t, "priority", raw.ServiceTier())
}
