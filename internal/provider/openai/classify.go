package openai

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/retry"
)

// Name is the provider field of the events of calls made with this SDK.
const Name = "openai"

// RequestIDHeader is the response header in which OpenAI names the request.
const RequestIDHeader = "x-request-id"

// Classifier classifies the errors of the OpenAI SDK. It is safe for
// concurrent use.
var Classifier retry.Classifier = retry.ClassifierFunc(Classify)

// quotaCodes are the error codes and types that say the account may not
// spend more (no credit, a billing hard limit, billing not set up):
// waiting seconds does not help, whatever the status.
var quotaCodes = map[string]bool{
	"insufficient_quota":         true,
	"billing_hard_limit_reached": true,
	"billing_not_active":         true,
}

// Classify recognises a *openai.Error or a *ssestream.StreamError anywhere
// in err's chain and classifies it; for any other error it returns ok
// false, so that the middleware's chain falls through to
// retry.ClassifyTransport.
//
// An HTTP error response is classified by retry.ClassifyHTTP (status rule,
// x-should-retry, Retry-After); a 429 without Retry-After takes its hint
// from the x-ratelimit-reset-* header of the limit that is exhausted. An
// account out of quota (code or type insufficient_quota,
// billing_hard_limit_reached, billing_not_active) becomes KindQuota and is
// never retried, whatever the status and headers say. An error inside a
// stream is classified by its code and type alone and has Status 0.
//
// An error of a client built with CompatClientOptions, whose response
// names an OpenAI-compatible provider (ProviderHeader) made by
// Compatible, is classified by that provider's preset instead: OpenAI's
// rules, then the preset's.
func Classify(err error, now time.Time) (retry.Classification, bool) {
	var oe *sdk.Error
	if asAPIError(err, &oe) {
		return classifyAPIError(oe, now), true
	}
	var se *ssestream.StreamError
	if errors.As(err, &se) && se != nil {
		return classifyStreamError(se), true
	}
	return retry.Classification{}, false
}

func classifyAPIError(oe *sdk.Error, now time.Time) retry.Classification {
	if p := compatOf(oe); p != nil {
		return classifyCompatAPIError(p, oe, now)
	}
	var header http.Header
	if oe.Response != nil {
		header = oe.Response.Header
	}
	c := retry.ClassifyHTTP(oe.StatusCode, header, now)
	if !c.HasHint && oe.StatusCode == http.StatusTooManyRequests {
		c.Hint, c.HasHint = RateLimitReset(header)
	}
	if quotaCodes[oe.Code] || quotaCodes[oe.Type] {
		c.Kind, c.Retryable = events.KindQuota, false
	}
	c.Message = message(statusPrefix(oe.StatusCode), codeOrType(oe.Code, oe.Type), oe.Message)
	c.ProviderRequestID = RequestID(header)
	return c
}

// streamError is the part of an in-stream error event that Classify reads.
type streamError struct {
	Error struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	} `json:"error"`
}

func classifyStreamError(se *ssestream.StreamError) retry.Classification {
	var body streamError
	_ = json.Unmarshal(se.Event.Data, &body) // undecodable data leaves the fields empty: KindOther
	var code string
	_ = json.Unmarshal(body.Error.Code, &code) // the code may be null or a number
	label := codeOrType(code, body.Error.Type)
	c := retry.Classification{}
	switch {
	case quotaCodes[code] || quotaCodes[body.Error.Type]:
		c.Kind = events.KindQuota
	case label == "server_error" || label == "internal_error" || label == "api_error":
		c.Kind, c.Retryable = events.KindServer, true
	case label == "rate_limit_exceeded" || body.Error.Type == "rate_limit_error" || body.Error.Type == "tokens" || body.Error.Type == "requests":
		c.Kind, c.Retryable = events.KindRateLimit, true
	case body.Error.Type == "invalid_request_error":
		c.Kind = events.KindClient
	default:
		c.Kind = events.KindOther
	}
	c.Message = message("error event in stream", label, body.Error.Message)
	return c
}

// RateLimitReset reads the hint of a 429 that has no Retry-After: the
// x-ratelimit-reset-requests or x-ratelimit-reset-tokens duration ("1s",
// "6m0s", "20ms") of each limit whose x-ratelimit-remaining-* is 0, the
// longer when both are. ok is false when no exhausted limit has a
// parseable reset.
func RateLimitReset(h http.Header) (d time.Duration, ok bool) {
	if h == nil {
		return 0, false
	}
	for _, limit := range []string{"requests", "tokens"} {
		if strings.TrimSpace(h.Get("x-ratelimit-remaining-"+limit)) != "0" {
			continue
		}
		reset, err := time.ParseDuration(strings.TrimSpace(h.Get("x-ratelimit-reset-" + limit)))
		if err != nil || reset < 0 {
			continue
		}
		if !ok || reset > d {
			d, ok = reset, true
		}
	}
	return d, ok
}

func statusPrefix(status int) string {
	s := strconv.Itoa(status)
	if text := http.StatusText(status); text != "" {
		s += " " + text
	}
	return s
}

func codeOrType(code, typ string) string {
	if code != "" {
		return code
	}
	return typ
}

// message is the event's short description: where the error came from,
// its code or type and the API's own sentence, never the raw body.
func message(prefix, label, apiMsg string) string {
	var b strings.Builder
	b.WriteString(prefix)
	if label != "" {
		b.WriteString(": " + label)
	}
	if apiMsg = strings.TrimSpace(apiMsg); apiMsg != "" {
		b.WriteString(": " + apiMsg)
	}
	return retry.Truncate(strings.ToValidUTF8(b.String(), "\uFFFD"))
}

// RequestID returns the x-request-id of a response's headers (for a call
// that succeeded, read them with option.WithResponseInto), or "" when
// there is none or it does not fit the contract (too long, not UTF-8): a
// partial id finds nothing, so it is dropped rather than cut.
func RequestID(h http.Header) string {
	if h == nil {
		return ""
	}
	return requestIDOf(h.Get(RequestIDHeader))
}

// requestIDOf is a request ID header's value as the contract takes it:
// "" when it does not fit.
func requestIDOf(v string) string {
	id := strings.TrimSpace(v)
	if len(id) > events.MaxProviderReqID || !utf8.ValidString(id) {
		return ""
	}
	return id
}
