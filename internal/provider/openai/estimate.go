package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/tiktoken-go/tokenizer"
)

// MaxEstimateBytes bounds the text EstimateInput tokenizes, in bytes: 256
// KiB. The tokenizer costs about 0.13 s of CPU and 60 MB of short-lived
// allocations per MiB of text (BenchmarkEstimateInput: 33 ms and 15 MB
// for 256 KiB), so tokenizing the whole of a request as large as the
// gateway accepts (32 MiB) would cost seconds and about 2 GB; with the
// cap, a 32 MiB request costs about 0.5 s and 160 MB, mostly decoding its
// JSON.
// Text beyond it is not tokenized: it is counted at the rate (tokens per
// byte) of the text before it, and the estimate is Sampled.
const MaxEstimateBytes = 256 << 10

// Encodings of the tokenizers EstimateInput uses.
const (
	EncodingO200k  = "o200k_base"  // gpt-4o, gpt-4.1, gpt-4.5, gpt-5, o1, o3, o4, and unknown models
	EncodingCl100k = "cl100k_base" // gpt-4 (not 4o, 4.1, 4.5), gpt-3.5
)

// Estimate is the input of a request counted with the model family's
// tokenizer: what the provider would have reported, when it reported
// nothing.
type Estimate struct {
	// Tokens is the estimated input, overheads included.
	Tokens int64
	// Encoding names the tokenizer used (EncodingO200k, EncodingCl100k).
	Encoding string
	// Partial: part of the input is not estimated (images, audio, files,
	// built-in tools, members of an unexpected type), so Tokens is short
	// of the real input by what those parts cost.
	Partial bool
	// Sampled: the request's text is longer than MaxEstimateBytes; the
	// text past it was counted at the rate of the text before it.
	Sampled bool
}

// ErrNotEstimable is the error of EstimateInput for an endpoint whose
// input it does not estimate (embeddings report their usage whole), or a
// body that is not a request of the endpoint.
var ErrNotEstimable = errors.New("openai: input not estimable")

// EncodingFor returns the encoding of a model's family, as OpenAI's
// tiktoken maps it: o200k_base for gpt-4o, gpt-4.1, gpt-4.5, gpt-5 and
// the o-series; cl100k_base for the other gpt-4 and gpt-3.5 models. A
// fine-tuned model ("ft:gpt-4o-mini:org::id") is its base's. Any other
// model (an OpenAI-compatible provider's, with a tokenizer of its own
// that is not available offline) gets o200k_base: an approximation.
func EncodingFor(model string) string {
	m := strings.ToLower(strings.TrimPrefix(model, "ft:"))
	for _, p := range []string{"gpt-4o", "gpt-4.1", "gpt-4.5", "chatgpt-4o"} {
		if strings.HasPrefix(m, p) {
			return EncodingO200k
		}
	}
	for _, p := range []string{"gpt-4", "gpt-3.5", "gpt-35", "text-embedding-ada-002", "text-embedding-3"} {
		if strings.HasPrefix(m, p) {
			return EncodingCl100k
		}
	}
	return EncodingO200k
}

// codecs are the tokenizers, built once (their vocabularies are embedded
// and decoded on first use) and shared: a codec is safe for concurrent
// use (its regexp pools its runners, its vocabulary is read only).
var (
	o200k  = sync.OnceValue(func() tokenizer.Codec { return mustCodec(tokenizer.O200kBase) })
	cl100k = sync.OnceValue(func() tokenizer.Codec { return mustCodec(tokenizer.Cl100kBase) })
)

func mustCodec(enc tokenizer.Encoding) tokenizer.Codec {
	c, err := tokenizer.Get(enc)
	if err != nil {
		panic("openai: tokenizer " + string(enc) + ": " + err.Error()) // built into the library: cannot happen
	}
	return c
}

// The overheads of OpenAI's cookbook ("How to count tokens with
// tiktoken", num_tokens_from_messages and num_tokens_for_tools) for
// chat models: each message costs 3 tokens besides its content, a name 1
// more, and the reply is primed with 3. A function definition costs
// funcInit (7 on o200k models, 10 on cl100k), its properties propInit, each
// property propKey, an enum enumInit and each enum item enumItem; the
// function list funcEnd.
const (
	tokensPerMessage = 3
	tokensPerName    = 1
	tokensReply      = 3

	funcInitO200k  = 7
	funcInitCl100k = 10
	propInit       = 3
	propKey        = 3
	enumInit       = -3
	enumItem       = 3
	funcEnd        = 12
)

// EstimateInput estimates the input tokens of a request body of an
// accounted endpoint (EndpointChat, EndpointResponses) with the
// tokenizer of model's family (EncodingFor; "" takes the body's model).
//
// A chat request counts, by the cookbook's rules: each message's role,
// its text (a string, or the text of its "text" parts), its name, the
// names and arguments of its tool calls, and the overheads; each
// function tool's name, description and first-level properties. A
// Responses request counts its instructions as a system message, its
// input (a string as one user message; messages with "input_text",
// "output_text" or "refusal" parts; function calls and their outputs,
// reasoning summaries) and its function tools, the same way.
//
// Images, audio and files, and built-in tools (web search, file
// search...), are not estimated: they are left out and the estimate is
// Partial. The body is not validated beyond what counting needs: a
// member of an unexpected type counts nothing and makes the estimate
// Partial. The error is ErrNotEstimable, wrapped with the reason, for
// another endpoint or a body that is not a JSON object.
func EstimateInput(endpoint, model string, body []byte) (Estimate, error) {
	var req estimateRequest
	if endpoint != EndpointChat && endpoint != EndpointResponses {
		return Estimate{}, fmt.Errorf("%w: endpoint %q (want %q or %q)", ErrNotEstimable, endpoint, EndpointChat, EndpointResponses)
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return Estimate{}, fmt.Errorf("%w: the %s request body is not a JSON object: %v", ErrNotEstimable, endpoint, err)
	}
	if model == "" {
		model = req.Model
	}
	c := newCounter(EncodingFor(model), MaxEstimateBytes)
	if endpoint == EndpointChat {
		c.chat(&req)
	} else {
		c.responses(&req)
	}
	return c.estimate(), nil
}

// estimateRequest is what EstimateInput reads of a chat or Responses
// request.
type estimateRequest struct {
	Model        string            `json:"model"`
	Messages     []json.RawMessage `json:"messages"`     // chat
	Functions    []json.RawMessage `json:"functions"`    // chat, deprecated
	Tools        []json.RawMessage `json:"tools"`        // both
	Instructions json.RawMessage   `json:"instructions"` // responses
	Input        json.RawMessage   `json:"input"`        // responses
}

// counter sums the tokens of the pieces of a request, within a budget of
// bytes to tokenize.
type counter struct {
	codec    tokenizer.Codec
	encoding string
	funcInit int64

	budget  int   // bytes left to tokenize
	tokens  int64 // of the pieces counted, overheads included
	counted int64 // tokens of the text tokenized
	seen    int64 // bytes of the text tokenized
	over    int64 // bytes of text past the budget, not tokenized
	partial bool
}

func newCounter(encoding string, budget int) *counter {
	c := &counter{encoding: encoding, budget: budget, codec: o200k(), funcInit: funcInitO200k}
	if encoding == EncodingCl100k {
		c.codec, c.funcInit = cl100k(), funcInitCl100k
	}
	return c
}

// estimate is the sum, the text past the budget counted at the rate of
// the text before it (rounded up).
func (c *counter) estimate() Estimate {
	t := c.tokens
	if c.over > 0 {
		if c.seen > 0 {
			t += (c.over*c.counted + c.seen - 1) / c.seen
		} else {
			t += (c.over + 3) / 4 // nothing tokenized (a zero budget): about 4 bytes a token
		}
	}
	return Estimate{Tokens: max(t, 0), Encoding: c.encoding, Partial: c.partial, Sampled: c.over > 0}
}

// text counts the tokens of s, within the budget.
func (c *counter) text(s string) {
	if s == "" {
		return
	}
	if len(s) > c.budget {
		cut := c.budget
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		c.over += int64(len(s) - cut)
		s = s[:cut]
	}
	c.budget -= len(s)
	n, err := c.codec.Count(s)
	if err != nil { // only in the codec's strict mode, which is not set
		c.partial = true
		return
	}
	c.tokens += int64(n)
	c.counted += int64(n)
	c.seen += int64(len(s))
}

// raw counts a JSON string member; null or absent counts nothing, and any
// other value is not estimated.
func (c *counter) raw(v json.RawMessage) {
	if len(v) == 0 || string(v) == "null" {
		return
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		c.partial = true
		return
	}
	c.text(s)
}

// chatMessage is a chat message, or a Responses input item: the members
// that are counted.
type chatMessage struct {
	Type      string          `json:"type"` // responses: "message" (or ""), "function_call", "function_call_output", "reasoning"...
	Role      json.RawMessage `json:"role"`
	Content   json.RawMessage `json:"content"`
	Name      json.RawMessage `json:"name"`
	ToolCalls []struct {
		Function struct {
			Name      json.RawMessage `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
	FunctionCall *struct { // chat, deprecated
		Name      json.RawMessage `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function_call"`
	Arguments json.RawMessage `json:"arguments"` // responses function_call
	Output    json.RawMessage `json:"output"`    // responses function_call_output
	Summary   []contentPart   `json:"summary"`   // responses reasoning
}

// contentPart is one part of a message's content.
type contentPart struct {
	Type    string          `json:"type"`
	Text    json.RawMessage `json:"text"`
	Refusal json.RawMessage `json:"refusal"`
}

// chat counts a chat completion request.
func (c *counter) chat(req *estimateRequest) {
	for _, raw := range req.Messages {
		c.message(raw)
	}
	c.tokens += tokensReply
	c.tools(req.Tools, req.Functions)
}

// responses counts a Responses request.
func (c *counter) responses(req *estimateRequest) {
	if len(req.Instructions) > 0 && string(req.Instructions) != "null" {
		c.tokens += tokensPerMessage
		c.text("system")
		c.raw(req.Instructions)
	}
	in := req.Input
	switch {
	case len(in) == 0 || string(in) == "null":
	case in[0] == '"':
		c.tokens += tokensPerMessage
		c.text("user")
		c.raw(in)
	case in[0] == '[':
		var items []json.RawMessage
		if json.Unmarshal(in, &items) != nil {
			c.partial = true
			break
		}
		for _, raw := range items {
			c.message(raw)
		}
	default:
		c.partial = true
	}
	c.tokens += tokensReply
	c.tools(req.Tools, nil)
}

// message counts one chat message or Responses input item.
func (c *counter) message(raw json.RawMessage) {
	var m chatMessage
	if json.Unmarshal(raw, &m) != nil {
		c.partial = true
		return
	}
	c.tokens += tokensPerMessage
	switch m.Type {
	case "", "message":
	case "function_call":
		c.text("assistant")
		c.raw(m.Name)
		c.raw(m.Arguments)
		return
	case "function_call_output":
		c.text("tool")
		c.content(m.Output)
		return
	case "reasoning":
		for _, p := range m.Summary {
			c.raw(p.Text)
		}
		return
	default: // item_reference, built-in tool calls and their outputs
		c.partial = true
		return
	}
	c.raw(m.Role)
	c.content(m.Content)
	if len(m.Name) > 0 && string(m.Name) != "null" {
		c.raw(m.Name)
		c.tokens += tokensPerName
	}
	for _, tc := range m.ToolCalls {
		c.raw(tc.Function.Name)
		c.raw(tc.Function.Arguments)
	}
	if f := m.FunctionCall; f != nil {
		c.raw(f.Name)
		c.raw(f.Arguments)
	}
}

// content counts a message's content: a string, or parts of which the
// text ones are counted.
func (c *counter) content(v json.RawMessage) {
	if len(v) == 0 || v[0] != '[' {
		c.raw(v)
		return
	}
	var parts []contentPart
	if json.Unmarshal(v, &parts) != nil {
		c.partial = true
		return
	}
	for _, p := range parts {
		switch p.Type {
		case "text", "input_text", "output_text":
			c.raw(p.Text)
		case "refusal":
			c.raw(p.Refusal)
		default: // image_url, input_audio, file, input_image, input_file
			c.partial = true
		}
	}
}

// function is a function definition: chat's tools[].function and
// functions[], and Responses' function tools.
type function struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Parameters  struct {
		Properties map[string]struct {
			Type        json.RawMessage `json:"type"`
			Description string          `json:"description"`
			Enum        []any           `json:"enum"`
		} `json:"properties"`
	} `json:"parameters"`
}

// tools counts the function definitions of a request by the cookbook's
// num_tokens_for_tools: each function's "name:description", each
// property's "name:type:description" and enum items, and the overheads.
func (c *counter) tools(tools, functions []json.RawMessage) {
	var fns []function
	for _, raw := range tools {
		var t struct {
			Type     string    `json:"type"`
			Function *function `json:"function"` // chat
			function           // responses
		}
		if json.Unmarshal(raw, &t) != nil || t.Type != "function" {
			c.partial = true // a built-in tool: its definition is the provider's
			continue
		}
		if t.Function != nil {
			fns = append(fns, *t.Function)
		} else {
			fns = append(fns, t.function)
		}
	}
	for _, raw := range functions {
		var f function
		if json.Unmarshal(raw, &f) != nil {
			c.partial = true
			continue
		}
		fns = append(fns, f)
	}
	if len(fns) == 0 {
		return
	}
	for _, f := range fns {
		c.tokens += c.funcInit
		c.text(f.Name + ":" + strings.TrimSuffix(f.Description, "."))
		if len(f.Parameters.Properties) == 0 {
			continue
		}
		c.tokens += propInit
		for name, p := range f.Parameters.Properties {
			c.tokens += propKey
			if p.Enum != nil {
				c.tokens += enumInit
				for _, item := range p.Enum {
					c.tokens += enumItem
					c.text(fmt.Sprint(item))
				}
			}
			c.text(name + ":" + typeName(p.Type) + ":" + strings.TrimSuffix(p.Description, "."))
		}
	}
	c.tokens += funcEnd
}

// typeName is a JSON schema's type: a string, or the strings of a list
// joined by commas.
func typeName(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	var l []string
	if json.Unmarshal(v, &l) == nil {
		return strings.Join(l, ",")
	}
	return ""
}
