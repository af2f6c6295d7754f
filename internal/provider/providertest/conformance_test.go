package providertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/provider"
	"github.com/agentledger/ledger/internal/retry"
)

// acme is a tiny provider for the suite's own test: one endpoint,
// POST /v1/complete, whose answers carry {"id", "usage": {"in", "out"}},
// whose streams are data-only events of type start, delta, end and error,
// and whose errors are {"error": {"type", "message"}}. bug names the
// defect a broken variant has ("" for none).
type acme struct{ bug string }

var _ provider.Provider = acme{}

func (acme) Name() string { return "acme" }

func (acme) Upstream() provider.Upstream {
	return provider.Upstream{Origin: "https://api.acme.test", CredentialHeaders: []string{"Authorization"}, BearerCredential: true, RequestIDHeader: "X-Request-Id"}
}

func (a acme) Match(path string) (provider.Route, bool) {
	if path == "/v1/complete" || (a.bug == "match-prefix" && strings.HasPrefix(path, "/v1/complete")) {
		return provider.Route{Endpoint: "complete"}, true
	}
	return provider.Route{}, false
}

func (a acme) Inspect(_ provider.Route, body []byte) provider.Request {
	if a.bug == "inspect-panics" && body[0] == 0 {
		panic("unreachable")
	}
	var r struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	if json.Unmarshal(body, &r) != nil {
		return provider.Request{Body: body}
	}
	if a.bug == "inspect-rewrites" {
		var v any
		_ = json.Unmarshal(body, &v)
		body, _ = json.MarshalIndent(v, "", " ")
	}
	return provider.Request{Model: r.Model, Stream: r.Stream, Body: body}
}

type acmeUsage struct {
	In    int64 `json:"in"`
	Out   int64 `json:"out"`
	Think int64 `json:"think"` // part of out
}

func (a acme) usage(u *acmeUsage) events.Usage {
	if a.bug != "negative-usage" {
		u.In, u.Out, u.Think = max(u.In, 0), max(u.Out, 0), max(u.Think, 0)
	}
	if a.bug != "reasoning-unclamped" {
		u.Think = min(u.Think, u.Out)
	}
	return events.Usage{InputTokens: u.In, OutputTokens: u.Out, ReasoningTokens: u.Think}
}

func (a acme) tier(reported string) string {
	if a.bug == "tier-raw" {
		return reported
	}
	return events.ServiceTier(reported)
}

func (a acme) BodyUsage(_ provider.Route, _ http.Header, body []byte) (provider.Answer, bool) {
	var r struct {
		ID    string     `json:"id"`
		Tier  string     `json:"tier"`
		Usage *acmeUsage `json:"usage"`
	}
	if json.Unmarshal(body, &r) != nil || r.Usage == nil {
		return provider.Answer{}, false
	}
	if len(r.ID) > events.MaxProviderReqID {
		r.ID = ""
	}
	return provider.Answer{Usage: a.usage(r.Usage), ProviderID: r.ID, ServiceTier: a.tier(r.Tier)}, true
}

type acmeStream struct {
	a    acme
	u    events.Usage
	id   string
	tier string
	done bool
}

func (a acme) NewStream(provider.Route, http.Header, provider.Request) provider.Stream {
	return &acmeStream{a: a}
}

func (s *acmeStream) Observe(_ string, data []byte) provider.Verdict {
	var ev struct {
		Type  string     `json:"type"`
		ID    string     `json:"id"`
		Tier  string     `json:"tier"`
		Usage *acmeUsage `json:"usage"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return provider.Verdict{}
	}
	switch ev.Type {
	case "error":
		return provider.Verdict{Error: true}
	case "start":
		if len(ev.ID) <= events.MaxProviderReqID {
			s.id = ev.ID
		}
		s.tier = s.a.tier(ev.Tier)
	case "end":
		s.done = true
	}
	if ev.Usage != nil {
		u := s.a.usage(ev.Usage)
		if ev.Type == "start" {
			s.u.InputTokens = u.InputTokens
		} else {
			s.u.OutputTokens, s.u.ReasoningTokens = u.OutputTokens, u.ReasoningTokens
		}
	}
	return provider.Verdict{}
}

func (s *acmeStream) Usage() events.Usage { return s.u }
func (s *acmeStream) Complete() bool      { return s.done }
func (s *acmeStream) ProviderID() string  { return s.id }
func (s *acmeStream) ServiceTier() string { return s.tier }

// acmeError is the error of acme's "SDK" for an error response.
type acmeError struct {
	status int
	header http.Header
	body   []byte
}

func (e *acmeError) Error() string { return fmt.Sprintf("acme: %d", e.status) }

func (a acme) Classifier() retry.Classifier {
	return retry.ClassifierFunc(func(err error, now time.Time) (retry.Classification, bool) {
		var ae *acmeError
		if a.bug == "greedy-classifier" {
			return retry.Classification{Kind: events.KindOther, Message: "mine"}, true
		}
		if !errors.As(err, &ae) {
			return retry.Classification{}, false
		}
		return a.ClassifyResponse(ae.status, ae.header, ae.body, now), true
	})
}

type acmeErrorBody struct {
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func (a acme) ClassifyResponse(status int, header http.Header, body []byte, now time.Time) retry.Classification {
	c := retry.ClassifyHTTP(status, header, now)
	if a.bug == "final-500" && status == 500 {
		c.Retryable = false
	}
	var e acmeErrorBody
	_ = json.Unmarshal(body, &e)
	c.Message = fmt.Sprintf("%d %s", status, http.StatusText(status))
	if e.Error != nil {
		if e.Error.Type == "quota" {
			c.Kind, c.Retryable = events.KindQuota, false
		}
		c.Message = retry.Truncate(c.Message + ": " + e.Error.Type + ": " + e.Error.Message)
	}
	if header != nil {
		c.ProviderRequestID = header.Get("X-Request-Id")
	}
	return c
}

func (acme) ClassifyStreamError(_ http.Header, data []byte, _ time.Time) retry.Classification {
	var e acmeErrorBody
	_ = json.Unmarshal(data, &e)
	c := retry.Classification{Kind: events.KindOther, Message: "error event in stream"}
	if e.Error != nil {
		if e.Error.Type == "overloaded" {
			c.Kind, c.Retryable = events.KindOverloaded, true
		}
		c.Message = retry.Truncate(c.Message + ": " + e.Error.Type + ": " + e.Error.Message)
	}
	return c
}

func (a acme) ErrorBody(status int, msg string) []byte {
	typ := "api_error"
	switch {
	case a.bug == "errorbody-format":
		b, _ := json.Marshal(map[string]string{"message": msg})
		return b
	case status == 429 && a.bug == "errorbody-quota":
		typ = "quota" // a 429 that the provider's own classification reads as out of quota
	case status == 429:
		typ = "rate_limit"
	case status == 503:
		typ = "overloaded"
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"type": typ, "message": msg}})
	return b
}

// acmeRateLimits are acme's rate-limit headers, in OpenAI's style.
var acmeRateLimits = guard.RateLimitHeaders{
	{Dim: guard.Requests, Limit: "X-Ratelimit-Limit-Requests", Remaining: "X-Ratelimit-Remaining-Requests", Reset: "X-Ratelimit-Reset-Requests"},
}

func (acme) RateLimits(h http.Header, now time.Time) guard.Observed {
	return acmeRateLimits.RateLimits(h, now)
}

// acmeCall is acme's "SDK": one POST, an *acmeError for an error status,
// the transport's error as it comes.
func acmeCall(ctx context.Context, _ testing.TB, baseURL string, hc *http.Client) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/v1/complete", strings.NewReader(`{"model":"a1"}`))
	if err != nil {
		return err
	}
	res, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode >= 400 {
		return &acmeError{status: res.StatusCode, header: res.Header, body: body}
	}
	return nil
}

func acmeErrorJSON(typ, msg string) string {
	return fmt.Sprintf(`{"error":{"type":%q,"message":%q}}`, typ, msg)
}

// acmeFeatures are acme's tables.
func acmeFeatures() Features {
	sse := map[string]string{"Content-Type": "text/event-stream"}
	stream := []Event{
		{Data: `{"type":"start","id":"cmp_1","tier":"Flex","usage":{"in":40}}`},
		{Data: `{"type":"delta","text":"Hel"}`},
		{Data: `{"type":"delta","text":"lo"}`},
		{Data: `{"type":"end","usage":{"out":2,"think":1}}`},
	}
	return Features{
		Name:      "acme",
		Routes:    []RouteCase{{Path: "/v1/complete", Want: provider.Route{Endpoint: "complete"}}},
		NotRoutes: []string{"/v1/models", "/v1/complete/x", "/v2/complete"},
		Requests: []RequestCase{
			{Name: "whole", Path: "/v1/complete", Body: `{"model":"a1","prompt":"hi"}`, Model: "a1"},
			{Name: "stream", Path: "/v1/complete", Body: `{"model":"a1","stream":true}`, Model: "a1", Stream: true},
		},
		Bodies: []BodyCase{
			{Name: "usage", Path: "/v1/complete", Body: `{"id":"cmp_1","text":"hi","tier":"Priority","usage":{"in":12,"out":3,"think":2}}`,
				Usage: events.Usage{InputTokens: 12, OutputTokens: 3, ReasoningTokens: 2}, ProviderID: "cmp_1", ServiceTier: "priority"},
			{Name: "reasoning above output", Path: "/v1/complete", Body: `{"id":"cmp_3","usage":{"in":1,"out":3,"think":9}}`,
				Usage: events.Usage{InputTokens: 1, OutputTokens: 3, ReasoningTokens: 3}, ProviderID: "cmp_3"},
			{Name: "no usage", Path: "/v1/complete", Body: `{"id":"cmp_2"}`, NoUsage: true},
		},
		Streams: []StreamCase{
			{
				Name: "complete", Path: "/v1/complete", Request: `{"model":"a1","stream":true}`, Header: sse, Events: stream,
				Usage: events.Usage{InputTokens: 40, OutputTokens: 2, ReasoningTokens: 1}, ProviderID: "cmp_1", ServiceTier: "flex",
				Cuts: []Cut{
					{After: 1, Usage: events.Usage{InputTokens: 40}, Lost: "the output: it comes in the end event"},
					{After: 3, Usage: events.Usage{InputTokens: 40}, Lost: "the output"},
				},
			},
			{
				Name: "error midway", Path: "/v1/complete", Request: `{"model":"a1","stream":true}`, Header: sse,
				Events: append(slices.Clone(stream[:2]), Event{Data: `{"type":"error","error":{"type":"overloaded","message":"busy"}}`}),
				Usage:  events.Usage{InputTokens: 40}, ProviderID: "cmp_1", ServiceTier: "flex", Incomplete: true, Errors: []int{2},
			},
		},
		StreamErrors: []StreamErrorCase{
			{Name: "overloaded", Data: `{"type":"error","error":{"type":"overloaded","message":"busy"}}`, Want: Want{Kind: events.KindOverloaded, Retryable: true, MessageContains: "overloaded: busy"}},
			{Name: "unknown", Data: `{"type":"error"}`, Want: Want{Kind: events.KindOther}},
		},
		Responses: []ResponseCase{
			{Name: "429", Reply: Reply{Status: 429, Header: map[string]string{"Retry-After": "2", "X-Request-Id": "r1"}, Body: acmeErrorJSON("rate_limit", "slow")},
				Want: Want{Kind: events.KindRateLimit, Status: 429, Retryable: true, Hint: 2 * time.Second, HasHint: true, ProviderRequestID: "r1", MessageContains: "slow"}},
			{Name: "quota", Reply: Reply{Status: 429, Body: acmeErrorJSON("quota", "pay")}, Want: Want{Kind: events.KindQuota, Status: 429}},
			{Name: "html", Reply: Reply{Status: 502, Header: map[string]string{"Content-Type": "text/html"}, Body: "<html>bad gateway</html>"},
				Want: Want{Kind: events.KindServer, Status: 502, Retryable: true, MessageLacks: "<html>"}},
		},
		ErrorBodies: ErrorBodies{
			Kinds: map[int]events.ErrorKind{400: events.KindClient, 429: events.KindRateLimit, 500: events.KindServer, 503: events.KindOverloaded, 504: events.KindTimeout},
			Parse: func(body []byte) (string, error) {
				var e acmeErrorBody
				if err := json.Unmarshal(body, &e); err != nil {
					return "", err
				}
				if e.Error == nil || e.Error.Type == "" {
					return "", errors.New("not an acme error: no error.type")
				}
				return e.Error.Message, nil
			},
		},
		RateLimits: []RateLimitCase{
			{Name: "requests", Header: map[string]string{"X-Ratelimit-Limit-Requests": "60", "X-Ratelimit-Remaining-Requests": "59", "X-Ratelimit-Reset-Requests": "1s"},
				Want: func() guard.Observed {
					var o guard.Observed
					o.Limit[guard.Requests], o.Remaining[guard.Requests], o.HasRemaining[guard.Requests] = 60, 59, true
					o.Reset[guard.Requests] = Now.Add(time.Second)
					return o
				}()},
		},
		SDK: &SDK{Call: acmeCall},
	}
}

// recorder is a suiteT that records instead of failing: the suite's test
// runs the suite against broken providers and reads which scenarios
// failed. Each Run runs its function on a goroutine of its own, so that
// FailNow and SkipNow end it as they end a test.
type recorder struct {
	testing.TB // the real test, for what the recorder does not record

	name     string
	mu       sync.Mutex
	failed   bool
	skipped  bool
	logs     []string
	cleanups []func()
	subs     []*recorder
}

func newRecorder(t testing.TB) *recorder { return &recorder{TB: t} }

func (r *recorder) Helper()      {}
func (r *recorder) Name() string { return r.name }

func (r *recorder) Logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}
func (r *recorder) Log(args ...any) { r.Logf("%s", fmt.Sprint(args...)) }

func (r *recorder) Fail() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
}
func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}
func (r *recorder) FailNow()                          { r.Fail(); runtime.Goexit() }
func (r *recorder) Errorf(format string, args ...any) { r.Logf(format, args...); r.Fail() }
func (r *recorder) Error(args ...any)                 { r.Log(args...); r.Fail() }
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...); r.FailNow() }
func (r *recorder) Fatal(args ...any)                 { r.Error(args...); r.FailNow() }

func (r *recorder) SkipNow() {
	r.mu.Lock()
	r.skipped = true
	r.mu.Unlock()
	runtime.Goexit()
}
func (r *recorder) Skip(args ...any)                 { r.Log(args...); r.SkipNow() }
func (r *recorder) Skipf(format string, args ...any) { r.Logf(format, args...); r.SkipNow() }
func (r *recorder) Skipped() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.skipped
}

func (r *recorder) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

func (r *recorder) Run(name string, f func(t suiteT)) bool {
	sub := &recorder{TB: r.TB, name: strings.TrimPrefix(r.name+"/"+name, "/")}
	r.mu.Lock()
	r.subs = append(r.subs, sub)
	r.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			for i := len(sub.cleanups) - 1; i >= 0; i-- {
				sub.cleanups[i]()
			}
		}()
		f(sub)
	}()
	<-done
	if sub.Failed() {
		r.Fail()
	}
	return !sub.Failed()
}

// outcome lists the scenarios (the recorder's direct subtests) that
// failed and that were skipped.
func (r *recorder) outcome() (failed, skipped []string) {
	for _, s := range r.subs {
		switch {
		case s.Failed():
			failed = append(failed, s.name)
		case s.Skipped():
			skipped = append(skipped, s.name)
		}
	}
	return failed, skipped
}

// report is the failures' messages, for a test's own failure message.
func (r *recorder) report() string {
	var b bytes.Buffer
	var walk func(*recorder)
	walk = func(r *recorder) {
		if r.Failed() {
			for _, l := range r.logs {
				fmt.Fprintf(&b, "%s: %s\n", r.name, l)
			}
		}
		for _, s := range r.subs {
			walk(s)
		}
	}
	walk(r)
	return b.String()
}

// TestConformanceOfAGoodProvider runs the suite, through Run and the real
// testing package, against a provider that meets it.
func TestConformanceOfAGoodProvider(t *testing.T) {
	Run(t, acme{}, acmeFeatures())
}

// TestConformanceCatchesBrokenProviders shows that the suite fails a
// provider with a defect, in the scenario that covers it, and only there.
func TestConformanceCatchesBrokenProviders(t *testing.T) {
	tests := []struct {
		bug        string
		wantFailed []string
	}{
		{"", nil},
		// ErrorBody's 429 says "quota", which ClassifyResponse reads as
		// out of quota: it disagrees with the table, and is not retried.
		{"errorbody-quota", []string{"errorbody", "errorbody-sdk", "errorbody-invariants"}},
		// ErrorBody is not the provider's error format.
		{"errorbody-format", []string{"errorbody", "errorbody-sdk", "errorbody-invariants"}},
		{"match-prefix", []string{"routes", "routes-invariants"}},
		{"inspect-panics", []string{"requests-invariants"}},
		{"inspect-rewrites", []string{"requests", "requests-invariants"}},
		{"negative-usage", []string{"usage-body-invariants", "usage-stream-invariants"}},
		// Reasoning reported above the output is kept: the usage breaks
		// the contract's subset rule.
		{"reasoning-unclamped", []string{"usage-body"}},
		// The tier is passed on as the provider wrote it ("Priority"),
		// not in the contract's form.
		{"tier-raw", []string{"usage-body", "usage-body-invariants", "usage-stream", "usage-stream-invariants"}},
		{"final-500", []string{"classify-invariants", "errorbody-invariants"}},
		{"greedy-classifier", []string{"classify-invariants", "classify-sdk", "classify-sdk-faults", "classify-sdk-timeouts", "errorbody-sdk"}},
	}
	for _, tt := range tests {
		t.Run("bug="+tt.bug, func(t *testing.T) {
			rec := newRecorder(t)
			run(rec, acme{bug: tt.bug}, acmeFeatures())
			failed, skipped := rec.outcome()
			assert.Equal(t, tt.wantFailed, failed, "failed scenarios:\n%s", rec.report())
			assert.Empty(t, skipped, "acme declares every feature")
		})
	}
}

// TestConformanceSkipsWhatAProviderLacks: the optional parts a provider
// does not declare are skipped, with the reason; the parts every provider
// has fail when their tables are missing, rather than pass empty.
func TestConformanceSkipsWhatAProviderLacks(t *testing.T) {
	f := acmeFeatures()
	f.SDK, f.RateLimits, f.StreamErrors = nil, nil, nil
	for i := range f.Streams {
		f.Streams[i].Cuts = nil
	}
	rec := newRecorder(t)
	run(rec, acme{}, f)
	failed, skipped := rec.outcome()
	assert.Empty(t, failed, rec.report())
	assert.Equal(t, []string{"usage-broken", "stream-errors", "classify-sdk", "classify-sdk-faults", "classify-sdk-timeouts", "errorbody-sdk", "ratelimits"}, skipped)

	rec = newRecorder(t)
	run(rec, acme{}, Features{Name: "acme"})
	failed, _ = rec.outcome()
	assert.Equal(t, []string{"routes", "requests", "usage-body", "usage-stream", "classify-responses", "errorbody"}, failed)
}

// TestConformanceCatchesWrongTables: the suite holds the tables to their
// own rules: a cut that loses usage says what, and a name is the
// provider's.
func TestConformanceCatchesWrongTables(t *testing.T) {
	tests := []struct {
		name   string
		change func(f *Features)
		want   []string
	}{
		{"cut without Lost", func(f *Features) { f.Streams[0].Cuts[0].Lost = "" }, []string{"usage-broken"}},
		{"cut past the end", func(f *Features) { f.Streams[0].Cuts[0].After = len(f.Streams[0].Events) }, []string{"usage-broken"}},
		{"another provider's name", func(f *Features) { f.Name = "openai" }, []string{"upstream"}},
		{"wrong usage", func(f *Features) { f.Bodies[0].Usage.InputTokens++ }, []string{"usage-body"}},
		{"wrong verdict", func(f *Features) { f.Streams[1].Errors = nil }, []string{"usage-stream"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := acmeFeatures()
			tt.change(&f)
			rec := newRecorder(t)
			run(rec, acme{}, f)
			failed, _ := rec.outcome()
			assert.Equal(t, tt.want, failed, rec.report())
		})
	}
}

func TestDuplicateMember(t *testing.T) {
	for body, want := range map[string]string{
		`{"a":1,"a":2}`:         "a",
		`{"a":{"b":1},"b":2}`:   "",
		`{"a":[{"b":1,"b":2}]}`: "b",
		`{"stream_options":{"include_usage":true},"stream":true,"stream_options":null}`: "stream_options",
		`[1,"a","a",{"a":"a"}]`:     "",
		`{"a":"a","b":"a"}`:         "",
		`{"a":[],"b":{},"c":1}`:     "",
		`{"x":{"a":1},"y":{"a":1}}`: "",
	} {
		got, ok := duplicateMember([]byte(body))
		assert.Equal(t, want, got, body)
		assert.Equal(t, want != "", ok, body)
	}
}
