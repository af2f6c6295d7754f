package anthropic

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/retry"
)

// Name is the provider field of the events of calls made with this SDK.
const Name = "anthropic"

// RequestIDHeader is the response header in which Anthropic names the
// request; the SDK copies it into anthropic.Error.RequestID.
const RequestIDHeader = "request-id"

// Classifier classifies the errors of the Anthropic SDK. It is safe for
// concurrent use.
var Classifier retry.Classifier = retry.ClassifierFunc(Classify)

// typeRequestTooLarge is the error type of a 413, which the SDK has no
// constant for.
const typeRequestTooLarge = "request_too_large"

// Classify recognises a *anthropic.Error anywhere in err's chain and
// classifies it; for any other error it returns ok false, so that the
// middleware's chain falls through to retry.ClassifyTransport.
//
// An HTTP error response is classified by retry.ClassifyHTTP (status rule,
// x-should-retry, Retry-After); then an account that is out of credit or
// over a spend limit (error type billing_error, the spend-limit error codes,
// the "credit balance is too low" message) becomes KindQuota and is never
// retried, whatever the status and headers say. An error event inside a
// stream, whose response status was 200, is classified by its error type
// alone and has Status 0.
func Classify(err error, now time.Time) (retry.Classification, bool) {
	var ae *sdk.Error
	if !errors.As(err, &ae) || ae == nil {
		return retry.Classification{}, false
	}
	typ := string(ae.Type())
	var c retry.Classification
	if ae.StatusCode >= 400 {
		var header http.Header
		if ae.Response != nil {
			header = ae.Response.Header
		}
		c = retry.ClassifyHTTP(ae.StatusCode, header, now)
	} else {
		c.Kind, c.Retryable = typeKind(typ)
	}
	if isQuota(ae, typ) {
		c.Kind, c.Retryable = events.KindQuota, false
	}
	c.Message = message(ae.StatusCode, typ, ae.Message)
	c.ProviderRequestID = requestID(ae.RequestID)
	return c, true
}

// typeKind maps the error type of an error event inside a stream to the
// contract's kind and retry rule, mirroring the status the same type comes
// with as an HTTP response.
func typeKind(typ string) (events.ErrorKind, bool) {
	switch sdk.ErrorType(typ) {
	case sdk.ErrorTypeOverloadedError:
		return events.KindOverloaded, true
	case sdk.ErrorTypeRateLimitError:
		return events.KindRateLimit, true
	case sdk.ErrorTypeAPIError:
		return events.KindServer, true
	case sdk.ErrorTypeTimeoutError:
		return events.KindTimeout, true
	case sdk.ErrorTypeAuthenticationError, sdk.ErrorTypePermissionError:
		return events.KindAuth, false
	case sdk.ErrorTypeBillingError:
		return events.KindQuota, false
	case sdk.ErrorTypeInvalidRequestError, sdk.ErrorTypeNotFoundError, typeRequestTooLarge:
		return events.KindClient, false
	}
	return events.KindOther, false
}

// quotaCodes are the error codes (error.details.error_code) that say the
// organization may not spend more; waiting seconds does not help.
var quotaCodes = map[sdk.ErrorCode]bool{
	sdk.ErrorCodeContractSpendLimitReached:            true,
	sdk.ErrorCodeEnforcedSpendLimitReached:            true,
	sdk.ErrorCodeLinkedOrganizationSpendLimitReached:  true,
	sdk.ErrorCodeLinkedOrganizationBillingUnavailable: true,
}

// quotaPhrases are the wordings of an out-of-credit or usage-limit error
// that Anthropic sends as a plain invalid_request_error.
var quotaPhrases = []string{
	"credit balance is too low",
	"reached your specified api usage limits",
}

func isQuota(ae *sdk.Error, typ string) bool {
	if sdk.ErrorType(typ) == sdk.ErrorTypeBillingError || quotaCodes[ae.ErrorCode()] {
		return true
	}
	msg := strings.ToLower(ae.Message)
	for _, p := range quotaPhrases {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

// message is the event's short description: the error type and the API's
// own sentence, never the raw body.
func message(status int, typ, apiMsg string) string {
	apiMsg = strings.TrimSpace(apiMsg)
	var b strings.Builder
	if status >= 400 {
		b.WriteString(strconv.Itoa(status))
		if text := http.StatusText(status); text != "" {
			b.WriteString(" " + text)
		}
	} else {
		b.WriteString("error event in stream")
	}
	if typ != "" {
		b.WriteString(": " + typ)
	}
	if apiMsg != "" {
		b.WriteString(": " + apiMsg)
	}
	return retry.Truncate(strings.ToValidUTF8(b.String(), "\uFFFD"))
}

// requestID keeps a request id that fits the contract; one that does not
// (too long, not UTF-8) is dropped rather than cut, since a partial id
// finds nothing.
func requestID(id string) string {
	id = strings.TrimSpace(id)
	if len(id) > events.MaxProviderReqID || !utf8.ValidString(id) {
		return ""
	}
	return id
}

// RequestID returns the request id of a response's headers, for a call
// that succeeded (read the headers with option.WithResponseInto), or ""
// when there is none or it does not fit the contract.
func RequestID(h http.Header) string {
	if h == nil {
		return ""
	}
	return requestID(h.Get(RequestIDHeader))
}
