package gateway

import (
	"net/http"
	"strings"

	panthropic "github.com/agentledger/ledger/internal/provider/anthropic"
	pgemini "github.com/agentledger/ledger/internal/provider/gemini"
	popenai "github.com/agentledger/ledger/internal/provider/openai"
)

// The providers the gateway speaks for, as the events name them.
const (
	Anthropic = panthropic.Name
	OpenAI    = popenai.Name
	Gemini    = pgemini.Name
)

// api is one accounted endpoint of a provider's API.
type api int

const (
	apiAnthropicMessages api = iota
	apiOpenAIChat
	apiOpenAIResponses
	apiOpenAIEmbeddings
	apiGeminiGenerate       // :generateContent
	apiGeminiStreamGenerate // :streamGenerateContent
)

// provider returns the provider whose API a is.
func (a api) provider() string {
	switch a {
	case apiAnthropicMessages:
		return Anthropic
	case apiGeminiGenerate, apiGeminiStreamGenerate:
		return Gemini
	}
	return OpenAI
}

// route is what the path of an accounted request says.
type route struct {
	api   api
	model string // from the path (Gemini); "" when the body names it
}

// openaiPaths are the accounted OpenAI endpoints.
var openaiPaths = map[string]api{
	"/v1/chat/completions": apiOpenAIChat,
	"/v1/responses":        apiOpenAIResponses,
	"/v1/embeddings":       apiOpenAIEmbeddings,
}

// geminiVersions are the API versions whose generateContent the gateway
// accounts.
var geminiVersions = []string{"/v1beta/models/", "/v1/models/", "/v1alpha/models/"}

// match returns the route of an accounted request: a POST to one of the
// providers' paths the gateway accounts. Everything else is proxied
// through unchanged.
func match(r *http.Request) (route, bool) {
	if r.Method != http.MethodPost {
		return route{}, false
	}
	p := r.URL.Path
	if p == "/v1/messages" {
		return route{api: apiAnthropicMessages}, true
	}
	if a, ok := openaiPaths[p]; ok {
		return route{api: a}, true
	}
	for _, prefix := range geminiVersions {
		rest, ok := strings.CutPrefix(p, prefix)
		if !ok {
			continue
		}
		model, method, ok := strings.Cut(rest, ":")
		if !ok || model == "" || strings.Contains(model, "/") {
			return route{}, false
		}
		switch method {
		case "generateContent":
			return route{api: apiGeminiGenerate, model: model}, true
		case "streamGenerateContent":
			return route{api: apiGeminiStreamGenerate, model: model}, true
		}
		return route{}, false
	}
	return route{}, false
}

// passthroughProvider picks the upstream of a request the gateway does not
// account, by what only one provider's clients send: Gemini's paths and
// API key, Anthropic's version header and API key; anything else goes to
// OpenAI.
func passthroughProvider(r *http.Request) string {
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/v1beta/"), strings.HasPrefix(p, "/v1alpha/"), strings.HasPrefix(p, "/upload/"),
		strings.HasPrefix(p, "/download/"), r.Header.Get("X-Goog-Api-Key") != "", r.URL.Query().Has("key"):
		return Gemini
	case r.Header.Get("Anthropic-Version") != "", r.Header.Get("X-Api-Key") != "", strings.HasPrefix(p, "/v1/messages"):
		return Anthropic
	}
	return OpenAI
}
