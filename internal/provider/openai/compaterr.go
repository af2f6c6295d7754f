package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/provider"
	"github.com/agentledger/ledger/internal/retry"
)

// This file classifies the errors of OpenAI-compatible APIs: OpenAI's
// rules, then a preset's (Preset.Rules), on the error bodies these APIs
// write, which are not all OpenAI's.

// apiError is what an error body says, whatever its shape.
type apiError struct {
	Message, Type, Code string
	// Limits are rate-limit headers the body carries (OpenRouter's
	// error.metadata.headers).
	Limits http.Header
}

// parseErrorBody reads an error body in any of the shapes the compatible
// APIs write: OpenAI's {"error":{"message","type","code","metadata"}}
// (code a string, a number or null), {"error":"message"} (Ollama's native
// API), and the fields at the top level, {"object":"error","message",
// "type","code"} (Mistral, older vLLM) or {"message":...} alone. A message
// that is an object (Mistral's validation details) is kept as its JSON.
// A body that is none of these gives the zero apiError.
func parseErrorBody(body []byte) apiError {
	var top struct {
		Error json.RawMessage `json:"error"`
		errorFields
	}
	if json.Unmarshal(body, &top) != nil {
		return apiError{}
	}
	if len(top.Error) > 0 {
		var inner errorFields
		if json.Unmarshal(top.Error, &inner) == nil {
			return inner.apiError()
		}
		var msg string
		if json.Unmarshal(top.Error, &msg) == nil {
			return apiError{Message: msg}
		}
	}
	return top.errorFields.apiError()
}

// errorFields are the members of an error object.
type errorFields struct {
	Message  json.RawMessage `json:"message"`
	Type     json.RawMessage `json:"type"`
	Code     json.RawMessage `json:"code"`
	Metadata struct {
		Headers map[string]json.RawMessage `json:"headers"`
	} `json:"metadata"`
}

func (f *errorFields) apiError() apiError {
	e := apiError{Message: jsonText(f.Message), Type: jsonText(f.Type), Code: jsonText(f.Code)}
	for k, v := range f.Metadata.Headers {
		if s := jsonText(v); s != "" {
			if e.Limits == nil {
				e.Limits = http.Header{}
			}
			e.Limits.Set(k, s)
		}
	}
	return e
}

// jsonText is a JSON value as text: a string's content, a number's digits,
// "" for null or nothing, any other value compacted.
func jsonText(v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || string(v) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return ""
	}
	return b.String()
}

// classifyCompat classifies an error response of an API of preset p:
// OpenAI's rules (status, x-should-retry, Retry-After, quota codes), then
// the first of p's rules that matches, then the server's x-should-retry
// again (it has the last word on retrying, except for quota). A 429
// without Retry-After takes its hint from the reset of the exhausted
// limit, in the headers or in the body (OpenRouter's metadata).
func classifyCompat(p *Preset, status int, header http.Header, e apiError, now time.Time) retry.Classification {
	c := retry.ClassifyHTTP(status, header, now)
	if r := p.rule(status, e); r != nil {
		c.Kind, c.Retryable = r.Kind, r.Retryable
		switch v := strings.TrimSpace(header.Get("X-Should-Retry")); {
		case strings.EqualFold(v, "true"):
			c.Retryable = true
		case strings.EqualFold(v, "false"):
			c.Retryable = false
		}
	}
	if quotaCodes[e.Code] || quotaCodes[e.Type] {
		c.Kind, c.Retryable = events.KindQuota, false
	}
	if !c.HasHint && c.Kind == events.KindRateLimit {
		c.Hint, c.HasHint = p.resetHint(header, e.Limits, now)
	}
	c.Message = message(statusPrefix(status), codeOrType(e.Code, e.Type), e.Message)
	if header != nil {
		c.ProviderRequestID = requestIDOf(header.Get(p.requestIDHeader()))
	}
	return c
}

// rule returns the first of p's rules that matches an error of status
// (0 inside a stream) that says e, or nil.
func (p *Preset) rule(status int, e apiError) *ErrorRule {
	for i := range p.Rules {
		r := &p.Rules[i]
		if r.Status != 0 && r.Status != status {
			continue
		}
		if len(r.Codes) == 0 && status != 0 {
			return r
		}
		for _, code := range r.Codes {
			if strings.EqualFold(code, e.Code) || strings.EqualFold(code, e.Type) {
				return r
			}
		}
	}
	return nil
}

// resetHint is how long until the latest reset of a limit with nothing
// remaining, by p's rate-limit headers, read from header then from
// inBody; ok is false when no exhausted limit says when it resets.
func (p *Preset) resetHint(header, inBody http.Header, now time.Time) (d time.Duration, ok bool) {
	for _, h := range []http.Header{header, inBody} {
		o := p.RateLimits(h, now)
		for dim := range guard.NumDims {
			if o.HasRemaining[dim] && o.Remaining[dim] == 0 && o.Reset[dim].After(now) {
				if r := o.Reset[dim].Sub(now); !ok || r > d {
					d, ok = r, true
				}
			}
		}
		if ok {
			return d, true
		}
	}
	return 0, false
}

// RateLimits reads p's rate-limit headers; values that do not parse are
// ignored one by one.
func (p *Preset) RateLimits(h http.Header, now time.Time) guard.Observed {
	var o guard.Observed
	if len(h) == 0 {
		return o
	}
	for _, n := range p.Limits {
		if v, ok := headerCount(h.Get(n.Limit)); ok && v > 0 && n.LimitPerMinute && n.Limit != "" {
			o.Limit[n.Dim] = v
		}
		if v, ok := headerCount(h.Get(n.Remaining)); ok && n.Remaining != "" {
			o.Remaining[n.Dim], o.HasRemaining[n.Dim] = v, true
		}
		if t, ok := n.ResetFormat.parse(h.Get(n.Reset), now); ok && n.Reset != "" {
			o.Reset[n.Dim] = t
		}
	}
	return o
}

// maxCount bounds a limit or remaining count: anything larger is garbage.
const maxCount = 1e15

// headerCount parses a non-negative count.
func headerCount(v string) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 || n > maxCount {
		return 0, false
	}
	return n, true
}

// maxReset bounds a reset: a day and more is not a rate limit's.
const maxReset = 24 * time.Hour

// parse reads a reset header written in f.
func (f ResetFormat) parse(v string, now time.Time) (time.Time, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, false
	}
	var d time.Duration
	switch f {
	case ResetUnixMillis:
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return time.Time{}, false
		}
		t := time.UnixMilli(ms)
		if d = t.Sub(now); d < 0 {
			d = 0
		}
	default:
		if s, err := strconv.ParseFloat(v, 64); err == nil {
			if !(s >= 0 && s <= maxReset.Seconds()) {
				return time.Time{}, false
			}
			d = time.Duration(s * float64(time.Second))
		} else if d, err = time.ParseDuration(v); err != nil || d < 0 {
			return time.Time{}, false
		}
	}
	if d > maxReset {
		return time.Time{}, false
	}
	return now.Add(d), true
}

// classifyCompatStream classifies the data of an error event inside a
// stream of an API of preset p: OpenAI's rules for stream errors, then p's
// rules of status 0 whose codes match.
func classifyCompatStream(p *Preset, data []byte) retry.Classification {
	c := ClassifyStreamError(data)
	e := parseErrorBody(data)
	if r := p.rule(0, e); r != nil {
		c.Kind, c.Retryable = r.Kind, r.Retryable
	}
	return c
}

// ProviderHeader is the response header in which the client options of a
// compatible upstream (CompatClientOptions) name its provider, so that
// Classify, which every OpenAI SDK error goes through whatever the base
// URL, applies that provider's rules. It is set on the client's copy of
// the response only; nothing sends it.
const ProviderHeader = "X-Agentledger-Provider"

// compat holds the rules of the compatible providers the program made,
// by name, for Classify.
var compat sync.Map // string -> *Preset

// registerCompat makes p's rules those of the SDK errors of provider
// name's clients. A later registration under the same name replaces it.
func registerCompat(name string, p *Preset) { compat.Store(name, p) }

// compatOf returns the rules of the provider that oe's response names, or
// nil for OpenAI's.
func compatOf(oe *sdk.Error) *Preset {
	if oe.Response == nil {
		return nil
	}
	name := oe.Response.Header.Get(ProviderHeader)
	if name == "" || name == Name {
		return nil
	}
	if p, ok := compat.Load(name); ok {
		return p.(*Preset)
	}
	return nil
}

// classifyCompatAPIError classifies an SDK error of a compatible API, its
// body already in OpenAI's shape (CompatClientOptions).
func classifyCompatAPIError(p *Preset, oe *sdk.Error, now time.Time) retry.Classification {
	e := apiError{Message: oe.Message, Type: oe.Type, Code: oe.Code}
	if e.Message == "" && e.Type == "" && e.Code == "" {
		e = errorOfBody(oe.Response)
	} else if f, ok := oe.JSON.ExtraFields["metadata"]; ok {
		var m errorFields
		if json.Unmarshal([]byte(`{"metadata":`+f.Raw()+`}`), &m) == nil {
			e.Limits = m.apiError().Limits
		}
	}
	var header http.Header
	if oe.Response != nil {
		header = oe.Response.Header
	}
	return classifyCompat(p, oe.StatusCode, header, e, now)
}

// errorOfBody reads the error body the SDK kept in resp (a client
// without CompatClientOptions, whose error body was not in OpenAI's
// shape), and gives it back.
func errorOfBody(resp *http.Response) apiError {
	if resp == nil || resp.Body == nil {
		return apiError{}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), resp.Body))
	if err != nil {
		return apiError{}
	}
	return parseErrorBody(body)
}

// asAPIError reports whether err's chain holds a *openai.Error, set in
// *oe.
func asAPIError(err error, oe **sdk.Error) bool { return errors.As(err, oe) && *oe != nil }

// maxErrorBody bounds the error body CompatClientOptions rewrites; a
// longer one is left as it is.
const maxErrorBody = 1 << 20

// CompatClientOptions returns the options of an OpenAI SDK client of the
// compatible provider name, to append after any other: ClientOptions, and
// a middleware that names the provider on each response (ProviderHeader)
// and gives the SDK every error body in OpenAI's shape. The SDK reads
// only {"error":{...}}: it leaves the fields of Mistral's top-level error
// empty, and fails on Ollama's {"error":"..."} with a JSON error that
// loses the status.
func CompatClientOptions(name string) []option.RequestOption {
	mw := func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		resp, err := next(req)
		if resp == nil {
			return resp, err
		}
		resp.Header.Set(ProviderHeader, name)
		if resp.StatusCode >= 400 && resp.Body != nil {
			normalizeErrorBody(resp)
		}
		return resp, err
	}
	return append(ClientOptions(), option.WithMiddleware(mw))
}

// normalizeErrorBody rewrites resp's error body to OpenAI's shape when it
// is in another that parseErrorBody knows; any other body is given back
// as it was read.
func normalizeErrorBody(resp *http.Response) {
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody+1))
	rest := resp.Body
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), rest), rest}
	if err != nil || len(body) > maxErrorBody {
		return
	}
	var top struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &top) != nil {
		return
	}
	if t := bytes.TrimSpace(top.Error); len(t) > 0 && t[0] == '{' {
		return // OpenAI's shape already
	}
	e := parseErrorBody(body)
	if e.Message == "" && e.Type == "" && e.Code == "" {
		return
	}
	out, err := json.Marshal(map[string]any{"error": map[string]any{"message": e.Message, "type": e.Type, "code": e.Code}})
	if err != nil {
		return
	}
	_ = rest.Close()
	resp.Body = io.NopCloser(bytes.NewReader(out))
	resp.ContentLength = int64(len(out))
	resp.Header.Set("Content-Length", strconv.Itoa(len(out)))
}

// RegisterClient makes the rules of preset ("" for none: OpenAI's) those
// of the errors of the SDK clients of provider name, built with
// CompatClientOptions(name), and registers its classifier and rate-limit
// headers for the retry middleware (retry.RegisterClassifier,
// retry.RegisterRateLimits): the Go adapter's callers call the API
// directly, not through a gateway. The error names the field and the
// rule.
func RegisterClient(name, preset string) error {
	p, err := presetFor(name, preset)
	if err != nil {
		return err
	}
	registerCompat(name, &p)
	retry.RegisterClassifier(name, Classifier)
	retry.RegisterRateLimits(name, &p)
	return nil
}

// presetFor checks name and returns the rules of preset for it; without
// a preset, OpenAI's rules on the three endpoints.
func presetFor(name, preset string) (Preset, error) {
	if err := provider.ValidateName("name", name); err != nil {
		return Preset{}, err
	}
	if preset == "" {
		return Preset{Name: name, Endpoints: []string{"chat", "embeddings", "responses"}}, nil
	}
	p, ok := LookupPreset(preset)
	if !ok {
		return Preset{}, fmt.Errorf("preset: %q is not one of %s", preset, strings.Join(Presets(), ", "))
	}
	return p, nil
}
