package openai

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/openai/openai-go/v3/option"

	"github.com/agentledger/ledger"
	impl "github.com/agentledger/ledger/internal/provider/openai"
)

// Upstream is an OpenAI-compatible API (Mistral, Groq, DeepSeek,
// Together, OpenRouter, vLLM, Ollama, or any other in OpenAI's dialect)
// that an openai-go client is pointed at, recorded under a name of its
// own: its calls are ledger.Call{Provider: u.Name()}, and their errors are
// classified by the API's own rules. Build the client with ClientOptions.
type Upstream struct {
	name, baseURL string
}

// CompatOption configures an Upstream.
type CompatOption func(*compatOptions)

type compatOptions struct {
	baseURL, preset string
	presetSet       bool
}

// WithBaseURL points the client elsewhere than the preset's API: the base
// URL as option.WithBaseURL takes it, /v1 included
// ("http://10.0.0.5:8000/v1"). Required for a name that is not a preset.
func WithBaseURL(u string) CompatOption { return func(o *compatOptions) { o.baseURL = u } }

// WithPreset applies a preset's rules (Presets) to an upstream of another
// name: Compatible("lab", WithPreset("vllm"), WithBaseURL(...)). "" means
// OpenAI's rules alone.
func WithPreset(preset string) CompatOption {
	return func(o *compatOptions) { o.preset, o.presetSet = preset, true }
}

// Compatible returns the OpenAI-compatible upstream named name: a preset
// (Presets), at its API's base URL unless WithBaseURL, or any name with
// WithBaseURL (and OpenAI's rules, or a preset's with WithPreset).
//
// It registers the upstream's classifier and rate-limit headers: every
// ledger middleware then accepts calls with Provider name, without
// WithClassifiers, and its guards learn the API's limits. The error
// names the option and the rule.
func Compatible(name string, opts ...CompatOption) (Upstream, error) {
	var o compatOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	preset := o.preset
	if !o.presetSet {
		if _, ok := impl.LookupPreset(name); ok {
			preset = name
		}
	}
	if err := impl.RegisterClient(name, preset); err != nil {
		return Upstream{}, fmt.Errorf("openai.Compatible: %w", err)
	}
	base := o.baseURL
	if base == "" {
		p, ok := impl.LookupPreset(preset)
		if !ok {
			return Upstream{}, fmt.Errorf("openai.Compatible: WithBaseURL: required for %q, which is not a preset (%s)", name, strings.Join(Presets(), ", "))
		}
		base = p.Origin + "/v1"
	}
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Upstream{}, fmt.Errorf("openai.Compatible: WithBaseURL: %q must be an absolute http(s) URL", base)
	}
	return Upstream{name: name, baseURL: strings.TrimRight(base, "/") + "/"}, nil
}

// Presets returns the names of the presets: mistral, groq, deepseek,
// together, openrouter, vllm, ollama.
func Presets() []string { return impl.Presets() }

// Name is the upstream's name, the Provider of its calls.
func (u Upstream) Name() string { return u.name }

// BaseURL is the base URL the client is pointed at, ending in "/".
func (u Upstream) BaseURL() string { return u.baseURL }

// ClientOptions returns the options of a client of the upstream, to
// append after any other (a later option wins): its base URL, the SDK's
// own retries off (as ClientOptions), and a middleware that names the
// upstream on each response (header X-Agentledger-Provider, the client's
// copy only) and gives the SDK the API's error bodies in OpenAI's shape,
// so that *openai.Error has the status, code, type and message of every
// one of them.
func (u Upstream) ClientOptions() []option.RequestOption {
	return append([]option.RequestOption{option.WithBaseURL(u.baseURL)}, impl.CompatClientOptions(u.name)...)
}

// Classifier classifies the errors of the upstream's client, named for
// it, for a chain of one's own (ledger.WithClassifiers). The middleware
// classifies them without it once Compatible has registered the
// upstream.
func (u Upstream) Classifier() ledger.Classifier {
	return ledger.ClassifierFor(u.name, ledger.ClassifierFunc(Classify))
}
