package openai

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	sdk "github.com/openai/openai-go/v3"

	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/provider"
	"github.com/agentledger/ledger/internal/retry"
)

// Config configures an OpenAI-compatible upstream (Compatible).
type Config struct {
	// Preset names the preset whose origin, endpoints, rate-limit headers
	// and error rules apply (Presets); "" for none: OpenAI's rules, and
	// the three endpoints.
	Preset string
	// Origin is the API's origin: scheme, host, port and an optional
	// path prefix, without the /v1 the clients' paths carry
	// ("https://api.groq.com/openai"). "" takes the preset's; required
	// without a preset.
	Origin string
}

// Compatible returns the provider named name (the events' provider field,
// the gateway's mount /NAME/) of an API in OpenAI's dialect: OpenAI's
// routes, usage and streams, with cfg's preset's origin, endpoints,
// rate-limit headers and error rules. Its SDK clients are built with
// CompatClientOptions(name): Compatible makes the preset's rules those of
// their errors too.
//
// The error names the field and the rule: a name that breaks
// provider.ValidateName, an unknown preset, an origin that is not an
// absolute http(s) URL, or that ends in /v1.
func Compatible(name string, cfg Config) (provider.Provider, error) {
	p, err := presetFor(name, cfg.Preset)
	if err != nil {
		return nil, err
	}
	origin := cfg.Origin
	if origin == "" {
		if p.Origin == "" {
			return nil, fmt.Errorf("origin: required without a preset")
		}
		origin = p.Origin
	}
	if origin, err = ValidateOrigin(origin); err != nil {
		return nil, fmt.Errorf("origin: %w", err)
	}
	p.Origin = origin
	registerCompat(name, &p)
	base := New(name, provider.Upstream{
		Origin:            origin,
		CredentialHeaders: []string{"Authorization"},
		BearerCredential:  true,
		RequestIDHeader:   p.requestIDHeader(),
	}, nil)
	cp := &compatProvider{Provider: base, preset: &p, endpoints: map[string]bool{}}
	for _, e := range p.Endpoints {
		cp.endpoints[e] = true
	}
	return cp, nil
}

// ValidateOrigin checks an origin of an OpenAI-compatible API and returns
// it without a trailing slash: an absolute http or https URL with a host,
// no credentials, query or fragment, whose path (a prefix the requests'
// paths are appended to) does not end in /v1, which the clients' paths
// carry.
func ValidateOrigin(s string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	switch {
	case err != nil:
		return "", fmt.Errorf("%q is not a URL: %v", s, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("%q must start with http:// or https://", s)
	case u.Host == "" || u.Hostname() == "":
		return "", fmt.Errorf("%q has no host", s)
	case u.User != nil:
		return "", fmt.Errorf("%q must not carry credentials (clients send theirs)", u.Redacted())
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return "", fmt.Errorf("%q must have no query or fragment", s)
	}
	path := strings.TrimRight(u.Path, "/")
	if path == "/v1" || strings.HasSuffix(path, "/v1") {
		return "", fmt.Errorf("%q must not end in /v1: the clients' paths (/NAME/v1/...) carry it; give %s", s,
			u.Scheme+"://"+u.Host+strings.TrimSuffix(path, "/v1"))
	}
	return u.Scheme + "://" + u.Host + path, nil
}

// compatProvider is an OpenAI-compatible API: OpenAI's dialect (Provider)
// with a preset's endpoints, rate-limit headers and error rules.
type compatProvider struct {
	*Provider
	preset    *Preset
	endpoints map[string]bool
}

// Match accounts the preset's endpoints only; the others are proxied.
func (p *compatProvider) Match(path string) (provider.Route, bool) {
	rt, ok := p.Provider.Match(path)
	if !ok || !p.endpoints[rt.Endpoint] {
		return provider.Route{}, false
	}
	return rt, true
}

// Inspect is OpenAI's, except that an API whose chat streams report their
// usage unasked, and refuse stream_options (Preset.UsageUnasked), gets
// the body as the client wrote it.
func (p *compatProvider) Inspect(rt provider.Route, body []byte) provider.Request {
	req := p.Provider.Inspect(rt, body)
	if p.preset.UsageUnasked && req.InjectedUsage {
		req.Body, req.InjectedUsage = body, false
	}
	return req
}

// Classifier classifies the SDK's errors by the preset's rules, whatever
// the provider their response names.
func (p *compatProvider) Classifier() retry.Classifier {
	return retry.ClassifierFunc(func(err error, now time.Time) (retry.Classification, bool) {
		return classifyWith(p.preset, err, now)
	})
}

// ClassifyResponse classifies an error response by OpenAI's rules, then
// the preset's, reading the error body in any of the compatible APIs'
// shapes.
func (p *compatProvider) ClassifyResponse(status int, header http.Header, body []byte, now time.Time) retry.Classification {
	return classifyCompat(p.preset, status, header, parseErrorBody(body), now)
}

// ClassifyStreamError classifies an error event of a stream by OpenAI's
// rules, then the preset's rules that hold in a stream.
func (p *compatProvider) ClassifyStreamError(_ http.Header, data []byte, _ time.Time) retry.Classification {
	return classifyCompatStream(p.preset, data)
}

// RateLimits reads the preset's rate-limit headers.
func (p *compatProvider) RateLimits(header http.Header, now time.Time) guard.Observed {
	return p.preset.RateLimits(header, now)
}

// PresetOf returns the preset of a provider made by Compatible, with the
// origin it was given; ok is false for any other provider.
func PresetOf(p provider.Provider) (Preset, bool) {
	cp, ok := p.(*compatProvider)
	if !ok {
		return Preset{}, false
	}
	return *cp.preset, true
}

// classifyWith classifies err as Classify does, with p's rules for an
// HTTP error response.
func classifyWith(p *Preset, err error, now time.Time) (retry.Classification, bool) {
	var oe *sdk.Error
	if asAPIError(err, &oe) {
		return classifyCompatAPIError(p, oe, now), true
	}
	return Classify(err, now)
}
