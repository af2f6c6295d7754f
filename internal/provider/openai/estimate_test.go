package openai

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/provider"
)

// cookbook reads a request of OpenAI's cookbook ("How to count tokens
// with tiktoken", sections 6 and 7) for model.
func cookbook(t *testing.T, name, model string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	require.NoError(t, err)
	return bytes.ReplaceAll(b, []byte("MODEL"), []byte(model))
}

// The counts the OpenAI API itself reported for the cookbook's requests
// (prompt_tokens, printed in the cookbook next to num_tokens_from_messages
// and num_tokens_for_tools): 129 and 105 on cl100k models, 124 and 101 on
// o200k ones.
func TestEstimateInputMatchesTheAPIOnTheCookbookRequests(t *testing.T) {
	for _, tc := range []struct {
		file, model string
		want        int64
		encoding    string
	}{
		{"cookbook_messages.json", "gpt-3.5-turbo", 129, EncodingCl100k},
		{"cookbook_messages.json", "gpt-4-0613", 129, EncodingCl100k},
		{"cookbook_messages.json", "gpt-4", 129, EncodingCl100k},
		{"cookbook_messages.json", "gpt-4o", 124, EncodingO200k},
		{"cookbook_messages.json", "gpt-4o-mini-2024-07-18", 124, EncodingO200k},
		{"cookbook_tools.json", "gpt-3.5-turbo", 105, EncodingCl100k},
		{"cookbook_tools.json", "gpt-4", 105, EncodingCl100k},
		{"cookbook_tools.json", "gpt-4o", 101, EncodingO200k},
		{"cookbook_tools.json", "gpt-4o-mini", 101, EncodingO200k},
	} {
		t.Run(tc.file+"/"+tc.model, func(t *testing.T) {
			e, err := EstimateInput(EndpointChat, "", cookbook(t, tc.file, tc.model))
			require.NoError(t, err)
			assert.Equal(t, Estimate{Tokens: tc.want, Encoding: tc.encoding}, e)
		})
	}
}

// Small requests counted by hand. The text counts were checked with the
// library itself (o200k_base and cl100k_base agree on these): "user",
// "system", "assistant", "tool", "hello" are 1 token each, "hello world"
// 2, "Say hello." 3. A message costs 3 more, a name 1 more, and the reply
// 3.
func TestEstimateInputCountsByHand(t *testing.T) {
	for _, tc := range []struct {
		name, endpoint, body string
		want                 int64
		partial              bool
	}{
		{"chat: one message", EndpointChat,
			`{"model":"gpt-4.1","messages":[{"role":"user","content":"hello"}]}`, 3 + 1 + 1 + 3, false},
		{"chat: text parts", EndpointChat,
			`{"model":"gpt-5","messages":[{"role":"user","content":[{"type":"text","text":"hello"},{"type":"text","text":"hello world"}]}]}`,
			3 + 1 + 1 + 2 + 3, false},
		{"chat: a name", EndpointChat,
			`{"model":"o3","messages":[{"role":"user","name":"hello","content":"hello"}]}`, 3 + 1 + 1 + 1 + 1 + 3, false},
		{"chat: an assistant's tool call and its result", EndpointChat,
			`{"model":"gpt-4o","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"hello","arguments":"hello world"}}]},` +
				`{"role":"tool","tool_call_id":"c1","content":"hello"}]}`,
			(3 + 1 + 1 + 2) + (3 + 1 + 1) + 3, false},
		{"chat: an image part is not estimated", EndpointChat,
			`{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"text","text":"hello"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]}`,
			3 + 1 + 1 + 3, true},
		{"chat: audio is not estimated", EndpointChat,
			`{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}]}`,
			3 + 1 + 3, true},
		{"chat: no messages", EndpointChat, `{"model":"gpt-4o"}`, 3, false},
		{"responses: a string", EndpointResponses, `{"model":"gpt-5","input":"hello"}`, 3 + 1 + 1 + 3, false},
		{"responses: instructions", EndpointResponses,
			`{"model":"gpt-5","instructions":"Say hello.","input":"hello"}`, (3 + 1 + 3) + (3 + 1 + 1) + 3, false},
		{"responses: items", EndpointResponses,
			`{"model":"gpt-5","input":[{"role":"user","content":[{"type":"input_text","text":"hello"}]},` +
				`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hello world"}]},` +
				`{"type":"function_call","call_id":"c1","name":"hello","arguments":"hello world"},` +
				`{"type":"function_call_output","call_id":"c1","output":"hello"}]}`,
			(3 + 1 + 1) + (3 + 1 + 2) + (3 + 1 + 1 + 2) + (3 + 1 + 1) + 3, false},
		{"responses: an image is not estimated", EndpointResponses,
			`{"model":"gpt-5","input":[{"role":"user","content":[{"type":"input_text","text":"hello"},{"type":"input_image","image_url":"https://x"}]}]}`,
			3 + 1 + 1 + 3, true},
		{"responses: a built-in tool is not estimated", EndpointResponses,
			`{"model":"gpt-5","input":"hello","tools":[{"type":"web_search"}]}`, 3 + 1 + 1 + 3, true},
		{"responses: an item reference is not estimated", EndpointResponses,
			`{"model":"gpt-5","input":[{"type":"item_reference","id":"msg_1"}]}`, 3 + 3, true},
		{"a member of the wrong type counts nothing", EndpointChat,
			`{"model":"gpt-4o","messages":[{"role":"user","content":42}]}`, 3 + 1 + 3, true},
		{"a message that is not an object", EndpointChat,
			`{"model":"gpt-4o","messages":["hello"]}`, 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := EstimateInput(tc.endpoint, "", []byte(tc.body))
			require.NoError(t, err)
			assert.Equal(t, tc.want, e.Tokens)
			assert.Equal(t, tc.partial, e.Partial)
		})
	}
}

// The same conversation and tool as a Responses request (instructions,
// input items, a flat function tool) counts as the chat request does.
func TestEstimateInputResponsesAsChat(t *testing.T) {
	body := `{"model":"gpt-4o","instructions":"You are a helpful assistant that can answer to questions about the weather.",
"input":[{"role":"user","content":"What's the weather like in San Francisco?"}],
"tools":[{"type":"function","name":"get_current_weather","description":"Get the current weather in a given location",
"parameters":{"type":"object","properties":{
"location":{"type":"string","description":"The city and state, e.g. San Francisco, CA"},
"unit":{"type":"string","description":"The unit of temperature to return","enum":["celsius","fahrenheit"]}}}}]}`
	e, err := EstimateInput(EndpointResponses, "", []byte(body))
	require.NoError(t, err)
	assert.Equal(t, Estimate{Tokens: 101, Encoding: EncodingO200k}, e)
}

func TestEstimateInputModelArgumentOverridesTheBody(t *testing.T) {
	body := cookbook(t, "cookbook_messages.json", "gpt-4o")
	e, err := EstimateInput(EndpointChat, "gpt-4", body)
	require.NoError(t, err)
	assert.Equal(t, Estimate{Tokens: 129, Encoding: EncodingCl100k}, e)
}

func TestEstimateInputRefuses(t *testing.T) {
	for _, tc := range []struct{ name, endpoint, body, msg string }{
		{"embeddings", EndpointEmbeddings, `{"model":"text-embedding-3-small","input":"hello"}`, `endpoint "embeddings"`},
		{"not JSON", EndpointChat, `hello`, "not a JSON object"},
		{"an array", EndpointResponses, `[]`, "not a JSON object"},
		{"empty", EndpointChat, ``, "not a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := EstimateInput(tc.endpoint, "", []byte(tc.body))
			require.ErrorIs(t, err, ErrNotEstimable)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

func TestEncodingFor(t *testing.T) {
	for model, want := range map[string]string{
		"gpt-4o": EncodingO200k, "gpt-4o-mini-2024-07-18": EncodingO200k, "chatgpt-4o-latest": EncodingO200k,
		"gpt-4.1-nano": EncodingO200k, "gpt-4.5-preview": EncodingO200k, "gpt-5": EncodingO200k, "gpt-5-mini": EncodingO200k,
		"o1": EncodingO200k, "o3-mini": EncodingO200k, "o4-mini": EncodingO200k, "ft:gpt-4o-mini:acme::x": EncodingO200k,
		"gpt-4": EncodingCl100k, "gpt-4-turbo-2024-04-09": EncodingCl100k, "gpt-4-0613": EncodingCl100k,
		"gpt-3.5-turbo": EncodingCl100k, "ft:gpt-3.5-turbo:acme::y": EncodingCl100k,
		"mistral-large-latest": EncodingO200k, "": EncodingO200k,
	} {
		assert.Equal(t, want, EncodingFor(model), model)
	}
}

// Text past the budget is not tokenized: it is counted at the rate of the
// text before it, and the estimate is sampled. A cut inside a character
// moves back to its start.
func TestEstimateBudget(t *testing.T) {
	for _, tc := range []struct {
		name    string
		budget  int
		texts   []string
		want    int64
		sampled bool
	}{
		{"within", 100, []string{"hello world", "hello"}, 3, false},
		{"exactly", 16, []string{"hello world", "hello"}, 3, false},
		// "hello world" (11 bytes, 2 tokens) tokenized; "hello" (5 bytes)
		// past the budget: ceil(5*2/11) = 1.
		{"past", 11, []string{"hello world", "hello"}, 3, true},
		// "hello " (6 bytes, 2 tokens: "hello", " "), then "world" (5
		// bytes) at 2/6 a byte: ceil(10/6) = 2.
		{"cut inside a text", 6, []string{"hello world"}, 4, true},
		// "où": 'o' is 1 byte, 'ù' 2; a budget of 2 keeps "o" only.
		{"cut inside a character", 2, []string{"où"}, 1 + 2, true},
		{"no budget", 0, []string{"hello world"}, 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCounter(EncodingO200k, tc.budget)
			for _, s := range tc.texts {
				c.text(s)
			}
			e := c.estimate()
			assert.Equal(t, tc.want, e.Tokens)
			assert.Equal(t, tc.sampled, e.Sampled)
			assert.False(t, e.Partial)
		})
	}
}

// Bodies of every shape, valid JSON or not, never panic and never give a
// negative estimate.
func TestEstimateInputGarbage(t *testing.T) {
	bodies := []string{
		`{}`, `null`, `{"messages":null}`, `{"messages":{}}`, `{"messages":[null,1,"x",[]]}`,
		`{"messages":[{"content":[null,{"type":"text","text":7}]}]}`, `{"input":{}}`, `{"input":[1,null]}`,
		`{"tools":[null,{"type":"function"},{"type":"function","function":null}]}`,
		`{"tools":[{"type":"function","function":{"parameters":{"properties":{"a":{"type":["string","null"],"enum":[1,null,{}]}}}}}]}`,
		`{"functions":[1]}`, `{"instructions":5}`, `{"messages":[{"role":"user","content":"` + strings.Repeat("\\u00e9", 100) + `"}]}`,
		"{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}",
	}
	for _, b := range bodies {
		for _, ep := range []string{EndpointChat, EndpointResponses} {
			e, err := EstimateInput(ep, "", []byte(b))
			if err == nil {
				assert.GreaterOrEqual(t, e.Tokens, int64(0), b)
			}
		}
	}
}

// benchRequest is a chat request of n user messages of prose, about 1
// KiB each.
func benchRequest(n int) []byte {
	para := strings.Repeat("The ledger counts every token exactly, usage against billed, retries included. ", 13)
	var b strings.Builder
	b.WriteString(`{"model":"gpt-4o","stream":true,"messages":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"role":"user","content":"` + para + `"}`)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// The cost of an estimate, by the size of the request: go test -run '^$'
// -bench EstimateInput -benchmem ./internal/provider/openai/
func BenchmarkEstimateInput(b *testing.B) {
	for _, tc := range []struct {
		name string
		n    int
	}{{"1KiB", 1}, {"64KiB", 64}, {"256KiB", 256}, {"1MiB", 1024}, {"32MiB", 32 << 10}} {
		body := benchRequest(tc.n)
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := EstimateInput(EndpointChat, "", body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// event is one server-sent event: its name and data.
type event struct{ name, data string }

// The gateway's accountants estimate the input of a stream whose usage
// never came, and only then: not when the usage arrived, not when
// nothing but an error arrived. Before issue 19 such a stream's input was
// 0 and nothing said it was unknown.
func TestStreamEstimatesInputWhenTheUsageNeverCame(t *testing.T) {
	const (
		chatBody = `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hello"}]}` // 3+1+1+3
		respBody = `{"model":"gpt-5","stream":true,"input":"hello world"}`                           // 3+1+2+3
		content  = `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi"}}]}`
		usage    = `{"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":8,"completion_tokens":1,"total_tokens":9}}`
		errChunk = `{"error":{"message":"overloaded","type":"server_error"}}`
		delta    = `{"type":"response.output_text.delta","delta":"hi"}`
		done     = `{"type":"response.completed","response":{"usage":{"input_tokens":9,"output_tokens":1,"total_tokens":10}}}`
	)
	for _, tc := range []struct {
		name, endpoint, body string
		events               []event
		want                 int64
		usage                int64 // input the stream reported
	}{
		{"chat cut before its usage", EndpointChat, chatBody, []event{{"", content}}, 8, 0},
		{"chat without include_usage", EndpointChat, chatBody, []event{{"", content}, {"", "[DONE]"}}, 8, 0},
		{"chat with its usage", EndpointChat, chatBody, []event{{"", content}, {"", usage}, {"", "[DONE]"}}, 0, 8},
		{"chat: an error and nothing else", EndpointChat, chatBody, []event{{"", errChunk}}, 0, 0},
		{"chat cut before any event", EndpointChat, chatBody, nil, 0, 0},
		{"chat: an error after content", EndpointChat, chatBody, []event{{"", content}, {"", errChunk}}, 8, 0},
		{"responses cut before completed", EndpointResponses, respBody, []event{{"response.output_text.delta", delta}}, 9, 0},
		{"responses completed", EndpointResponses, respBody, []event{{"response.output_text.delta", delta}, {"response.completed", done}}, 0, 9},
		{"responses: an error and nothing else", EndpointResponses, respBody, []event{{"error", errChunk}}, 0, 0},
		{"a body that is not JSON", EndpointChat, `not json`, []event{{"", content}}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Default.NewStream(provider.Route{Endpoint: tc.endpoint}, nil, provider.Request{Stream: true, Body: []byte(tc.body)})
			for _, ev := range tc.events {
				s.Observe(ev.name, []byte(ev.data))
			}
			est, ok := s.(provider.InputEstimator)
			require.True(t, ok, "OpenAI's streams estimate their input")
			assert.Equal(t, tc.want, est.EstimatedInput())
			assert.Equal(t, tc.usage, s.Usage().InputTokens, "the estimate is never the usage's input")
		})
	}
}
