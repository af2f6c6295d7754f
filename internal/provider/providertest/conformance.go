package providertest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/provider"
)

// Now is the suite's clock: the one instant every scenario passes as now
// (to ClassifyResponse, RateLimits and the SDK's classifier), so that a
// table can spell an HTTP-date hint or a reset time exactly.
var Now = time.Date(2026, time.January, 2, 3, 4, 5, 0, time.UTC)

// Features is what a provider declares to the conformance suite: the
// tables of its API and the samples the suite feeds it. Run runs one
// scenario per part; a scenario whose table is empty is skipped, with the
// reason, when the part is one a provider may lack (rate-limit headers,
// error events in a stream, broken streams, an SDK), and fails when it is
// one every provider has (routes, requests, bodies, streams, error
// responses, error bodies). The generic invariants run whatever the
// tables say.
type Features struct {
	// Name is the provider's name; the suite checks that the provider
	// under test is the one the tables are for.
	Name string

	// Routes are paths the gateway accounts, with the route Match must
	// give. NotRoutes are paths it must not account (they are proxied
	// unaccounted).
	Routes    []RouteCase
	NotRoutes []string

	// Requests are accounted request bodies and what Inspect must read.
	Requests []RequestCase

	// Bodies are whole (not streamed) responses and their usage.
	Bodies []BodyCase

	// Streams are streamed responses, event by event, with their usage,
	// and the points where the suite cuts them (StreamCase.Cuts).
	Streams []StreamCase

	// StreamErrors are error events inside a stream and their
	// classification (ClassifyStreamError). Empty: the provider's streams
	// carry no error events.
	StreamErrors []StreamErrorCase

	// Responses are raw error responses and their classification
	// (ClassifyResponse); with SDK set, the SDK's error for the same
	// response is classified by Classifier alike.
	Responses []ResponseCase

	// ErrorBodies says how the provider's errors look, for the error
	// bodies the gateway makes itself (ErrorBody).
	ErrorBodies ErrorBodies

	// RateLimits are response headers and what RateLimits must read of
	// them. Empty: the provider sends no rate-limit headers.
	RateLimits []RateLimitCase

	// SDK calls the provider's SDK; nil when the provider has none (the
	// SDK scenarios are skipped).
	SDK *SDK
}

// RouteCase is a path that Match accounts, and the route it must give.
type RouteCase struct {
	Path string
	Want provider.Route
}

// RequestCase is an accounted request's body and what Inspect must read
// of it.
type RequestCase struct {
	Name string
	// Path is matched with Match to give the route Inspect is called with.
	Path string
	Body string
	// Model, Stream and InjectedUsage are the Request Inspect must return.
	Model         string
	Stream        bool
	InjectedUsage bool
	// Sent is the body Inspect must return when it adds the usage option
	// ("" to check only that it changed and is JSON). Without the option
	// added, the body must come back as it was.
	Sent string
}

// BodyCase is a whole successful response and its usage.
type BodyCase struct {
	Name   string
	Path   string // matched with Match
	Header map[string]string
	Body   string
	// Usage, ProviderID and ServiceTier are what BodyUsage must return
	// (the tier in the contract's form, "" when the body names none);
	// NoUsage says the body carries none (ok false).
	Usage       events.Usage
	ProviderID  string
	ServiceTier string
	NoUsage     bool
}

// Event is one server-sent event: its name ("" for a data-only event) and
// its data.
type Event struct {
	Name string
	Data string
}

// StreamCase is a streamed response: the request that asked for it, the
// response's header and its events.
type StreamCase struct {
	Name string
	// Path is matched with Match, and Request (the request's body)
	// inspected with Inspect: the stream's accountant is made from the
	// route and Request as the gateway makes it.
	Path    string
	Request string
	Header  map[string]string
	Events  []Event
	// Usage, ProviderID, ServiceTier: the stream's after every event
	// (the tier in the contract's form, "" when the stream names none).
	Usage       events.Usage
	ProviderID  string
	ServiceTier string
	// Incomplete: the events stop before the stream's end event, so
	// Complete must stay false.
	Incomplete bool
	// Drop and Errors are the indexes (in Events) of the events whose
	// Verdict is Drop, and Error; every other event's verdict is zero.
	Drop   []int
	Errors []int
	// Cuts are points where the stream breaks.
	Cuts []Cut
}

// Cut is a stream broken after its first After events: what the
// accountant must say then.
type Cut struct {
	After    int
	Usage    events.Usage
	Complete bool
	// Lost says what the broken stream cannot tell (the input of an
	// OpenAI chat stream, for instance). It is required when Usage is not
	// the whole stream's: a provider declares what it loses.
	Lost string
}

// StreamErrorCase is the data of an error event inside a stream whose
// response had Header, and its classification.
type StreamErrorCase struct {
	Name   string
	Header map[string]string
	Data   string
	Want   Want
}

// ResponseCase is a raw error response and its classification.
type ResponseCase struct {
	Name  string
	Reply Reply
	Want  Want
	// SDKWant, when set, is the classification of the SDK's error for the
	// same response, where it differs from ClassifyResponse's (the SDK
	// drops something the raw response says); the two are then not
	// compared field by field.
	SDKWant *Want
}

// ErrorBodies says how the provider's error bodies look.
type ErrorBodies struct {
	// Kinds maps each status the gateway answers with itself to the kind
	// ClassifyResponse must give the body ErrorBody makes for it.
	Kinds map[int]events.ErrorKind
	// Parse decodes body as the provider's own error response (with its
	// SDK's error type where it has one) and returns the error's message;
	// an error when body is not one.
	Parse func(body []byte) (message string, err error)
}

// RateLimitCase is a response's headers and what RateLimits must read of
// them at Now.
type RateLimitCase struct {
	Name   string
	Header map[string]string
	Want   guard.Observed
}

// SDK is the provider's SDK, as its adapter builds it.
type SDK struct {
	// Call makes one unary call with a client of the provider's SDK built
	// as the adapter requires (the SDK's own retries off), whose HTTP
	// client is hc, against the API at baseURL, and returns the call's
	// error.
	Call func(ctx context.Context, t testing.TB, baseURL string, hc *http.Client) error
	// RequestTimeout makes the call with the SDK's own request timeout
	// option set to d; nil when the SDK has none. The suite checks that a
	// server that hangs makes it a retryable timeout, as it checks the
	// HTTP client's timeout.
	RequestTimeout func(ctx context.Context, t testing.TB, baseURL string, d time.Duration) error
}

// scenario is one part of the suite.
type scenario struct {
	name string
	// lacks returns why the provider lacks the part ("" when it has it).
	lacks func(f *Features) string
	run   func(t suiteT, p provider.Provider, f *Features)
}

// scenarios are the suite's parts, in the order Run runs them.
var scenarios = []scenario{
	{"upstream", nil, testUpstream},
	{"routes", nil, testRoutes},
	{"routes-invariants", nil, testRouteInvariants},
	{"requests", nil, testRequests},
	{"requests-invariants", nil, testRequestInvariants},
	{"usage-body", nil, testBodies},
	{"usage-body-invariants", nil, testBodyInvariants},
	{"usage-stream", nil, testStreams},
	{"usage-broken", lacksCuts, testCuts},
	{"usage-stream-invariants", nil, testStreamInvariants},
	{"stream-errors", lacksStreamErrors, testStreamErrors},
	{"classify-responses", nil, testResponses},
	{"classify-invariants", nil, testClassifyInvariants},
	{"classify-sdk", lacksSDK, testSDKResponses},
	{"classify-sdk-faults", lacksSDK, testSDKFaults},
	{"classify-sdk-timeouts", lacksSDK, testSDKTimeouts},
	{"errorbody", nil, testErrorBodies},
	{"errorbody-sdk", lacksSDK, testSDKErrorBodies},
	{"errorbody-invariants", nil, testErrorBodyInvariants},
	{"ratelimits", lacksRateLimits, testRateLimits},
	{"ratelimits-invariants", nil, testRateLimitInvariants},
}

// Run runs the conformance suite against p: every scenario as a subtest of
// t, each skipped (with the reason) when f says the provider lacks the
// part it covers. A provider's test is its Features:
//
//	func TestConformance(t *testing.T) {
//		providertest.Run(t, New(), providertest.Features{Name: "acme", Routes: ..., ...})
//	}
func Run(t *testing.T, p provider.Provider, f Features) {
	t.Helper()
	run(stdT{t}, p, f)
}

func run(t suiteT, p provider.Provider, f Features) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t suiteT) {
			if sc.lacks != nil {
				if why := sc.lacks(&f); why != "" {
					t.Skip(why)
				}
			}
			sc.run(t, p, &f)
		})
	}
}

func lacksCuts(f *Features) string {
	for _, s := range f.Streams {
		if len(s.Cuts) > 0 {
			return ""
		}
	}
	return "no stream declares Cuts (Features.Streams[i].Cuts)"
}

func lacksStreamErrors(f *Features) string {
	if len(f.StreamErrors) == 0 {
		return "the provider's streams carry no error events (Features.StreamErrors is empty)"
	}
	return ""
}

func lacksSDK(f *Features) string {
	if f.SDK == nil || f.SDK.Call == nil {
		return "the provider has no SDK adapter (Features.SDK is nil)"
	}
	return ""
}

func lacksRateLimits(f *Features) string {
	if len(f.RateLimits) == 0 {
		return "the provider sends no rate-limit headers (Features.RateLimits is empty)"
	}
	return ""
}

// required fails t when a table every provider has is empty.
func required(t suiteT, field string, n int) {
	t.Helper()
	if n == 0 {
		t.Fatalf("Features.%s is empty: every provider declares it", field)
	}
}

// header is m as an http.Header (nil for a nil m).
func header(m map[string]string) http.Header {
	if m == nil {
		return nil
	}
	return Reply{Header: m}.HTTPHeader()
}
