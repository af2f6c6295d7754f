package gemini

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genai"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/retry"
)

// Name is the provider field of the events of calls made with this SDK.
const Name = "gemini"

// Classifier classifies the errors of the genai SDK. It is safe for
// concurrent use.
var Classifier retry.Classifier = retry.ClassifierFunc(Classify)

// rpcStatus is the HTTP status each google.rpc code is sent with.
var rpcStatus = map[string]int{
	"CANCELLED":           499,
	"UNKNOWN":             http.StatusInternalServerError,
	"INVALID_ARGUMENT":    http.StatusBadRequest,
	"DEADLINE_EXCEEDED":   http.StatusGatewayTimeout,
	"NOT_FOUND":           http.StatusNotFound,
	"ALREADY_EXISTS":      http.StatusConflict,
	"PERMISSION_DENIED":   http.StatusForbidden,
	"UNAUTHENTICATED":     http.StatusUnauthorized,
	"RESOURCE_EXHAUSTED":  http.StatusTooManyRequests,
	"FAILED_PRECONDITION": http.StatusBadRequest,
	"ABORTED":             http.StatusConflict,
	"OUT_OF_RANGE":        http.StatusBadRequest,
	"UNIMPLEMENTED":       http.StatusNotImplemented,
	"INTERNAL":            http.StatusInternalServerError,
	"UNAVAILABLE":         http.StatusServiceUnavailable,
	"DATA_LOSS":           http.StatusInternalServerError,
}

// Classify recognises a genai.APIError (value or pointer) anywhere in err's
// chain and classifies it; for any other error it returns ok false, so
// that the middleware's chain falls through to retry.ClassifyTransport.
//
// The HTTP status (error.code, or the one the google.rpc code implies when
// it is missing) gives the kind and retry rule of retry.StatusKind; the
// google.rpc codes RESOURCE_EXHAUSTED, UNAVAILABLE, DEADLINE_EXCEEDED and
// INTERNAL are retried whatever the status. The hint is RetryInfo's
// retryDelay. A RESOURCE_EXHAUSTED that names a daily quota (a QuotaFailure
// violation or an ErrorInfo quota_limit containing "PerDay"), or a quota
// whose limit is 0, is KindQuota and never retried: it does not reset
// within any retry budget. Status is error.code as sent, 0 when missing
// or not an HTTP status (100-599), which an event cannot carry.
func Classify(err error, _ time.Time) (retry.Classification, bool) {
	ae, ok := asAPIError(err)
	if !ok {
		return retry.Classification{}, false
	}
	rpc := ae.Status
	_, isRPC := rpcStatus[rpc]
	status := ae.Code
	if status == 0 {
		status = rpcStatus[rpc]
	}
	c := retry.ClassifyHTTP(status, nil, time.Time{})
	c.Status = ae.Code
	if c.Status < 100 || c.Status > 599 {
		c.Status = 0 // not an HTTP status: the event takes none
	}
	switch rpc {
	case "RESOURCE_EXHAUSTED":
		c.Kind, c.Retryable = events.KindRateLimit, true
	case "UNAVAILABLE":
		c.Kind, c.Retryable = events.KindOverloaded, true
	case "DEADLINE_EXCEEDED":
		c.Kind, c.Retryable = events.KindTimeout, true
	case "INTERNAL":
		c.Kind, c.Retryable = events.KindServer, true
	}
	info := readDetails(ae.Details)
	c.Hint, c.HasHint = info.retryDelay, info.hasRetryDelay
	if (rpc == "RESOURCE_EXHAUSTED" || status == http.StatusTooManyRequests) && (info.terminalQuota || limitZero(ae.Message)) {
		c.Kind, c.Retryable = events.KindQuota, false
	}
	// Without a google.rpc code, the SDK built the error from a body that
	// was not a JSON error: its Message is that raw body, which stays out
	// of the event.
	apiMsg := ""
	if isRPC || rpc == "" {
		apiMsg = ae.Message
	}
	c.Message = message(status, rpcLabel(rpc, isRPC), apiMsg)
	return c, true
}

func asAPIError(err error) (genai.APIError, bool) {
	var ae genai.APIError
	if errors.As(err, &ae) {
		return ae, true
	}
	var pe *genai.APIError
	if errors.As(err, &pe) && pe != nil {
		return *pe, true
	}
	return genai.APIError{}, false
}

func rpcLabel(rpc string, isRPC bool) string {
	if isRPC {
		return rpc
	}
	return ""
}

// details is what Classify reads from an error's google.rpc details.
type details struct {
	retryDelay    time.Duration
	hasRetryDelay bool
	terminalQuota bool
}

const (
	typeRetryInfo    = "type.googleapis.com/google.rpc.RetryInfo"
	typeQuotaFailure = "type.googleapis.com/google.rpc.QuotaFailure"
	typeErrorInfo    = "type.googleapis.com/google.rpc.ErrorInfo"
)

// readDetails reads RetryInfo, QuotaFailure and ErrorInfo from the decoded
// details. Anything of an unexpected shape is skipped.
func readDetails(ds []map[string]any) details {
	var out details
	for _, d := range ds {
		switch d["@type"] {
		case typeRetryInfo:
			if s, ok := d["retryDelay"].(string); ok {
				out.retryDelay, out.hasRetryDelay = parseProtoDuration(s)
			}
		case typeQuotaFailure:
			violations, _ := d["violations"].([]any)
			for _, v := range violations {
				vm, _ := v.(map[string]any)
				id, _ := vm["quotaId"].(string)
				if isDaily(id) || quotaValueZero(vm["quotaValue"]) {
					out.terminalQuota = true
				}
			}
		case typeErrorInfo:
			meta, _ := d["metadata"].(map[string]any)
			if limit, ok := meta["quota_limit"].(string); ok && isDaily(limit) {
				out.terminalQuota = true
			}
		}
	}
	return out
}

func isDaily(quotaID string) bool {
	return strings.Contains(strings.ToLower(quotaID), "perday")
}

// quotaValueZero reports whether a QuotaFailure's quotaValue (an int64,
// which proto3 JSON sends as a string) is 0: the quota does not exist for
// this project or tier at all.
func quotaValueZero(v any) bool {
	switch v := v.(type) {
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		return err == nil && n == 0
	case float64:
		return v == 0
	}
	return false
}

// limitZero reports whether the message names a quota whose limit is 0
// ("Quota exceeded for metric: ..., limit: 0"), for errors that come
// without a QuotaFailure.
func limitZero(msg string) bool {
	const marker = "limit: 0"
	for {
		i := strings.Index(msg, marker)
		if i < 0 {
			return false
		}
		msg = msg[i+len(marker):]
		if msg == "" || msg[0] < '0' || msg[0] > '9' {
			return true
		}
	}
}

// maxHint bounds a RetryInfo delay, as retry.ParseRetryAfter bounds a
// header, so the conversion cannot overflow.
const maxHint = 1e9 // seconds, about 31 years

// parseProtoDuration parses a google.protobuf.Duration in its JSON form:
// decimal seconds with an "s" suffix ("33s", "0.250s").
func parseProtoDuration(s string) (time.Duration, bool) {
	num, ok := strings.CutSuffix(strings.TrimSpace(s), "s")
	if !ok {
		return 0, false
	}
	secs, err := strconv.ParseFloat(num, 64)
	if err != nil || secs < 0 || secs >= maxHint {
		return 0, false
	}
	return time.Duration(secs * float64(time.Second)), true
}

// message is the event's short description: the status, the google.rpc
// code and the API's own sentence, never the raw body.
func message(status int, rpc, apiMsg string) string {
	var b strings.Builder
	if status != 0 {
		b.WriteString(strconv.Itoa(status))
		if text := http.StatusText(status); text != "" {
			b.WriteString(" " + text)
		}
	} else {
		b.WriteString("Gemini API error")
	}
	if rpc != "" {
		b.WriteString(": " + rpc)
	}
	if apiMsg = strings.TrimSpace(apiMsg); apiMsg != "" {
		b.WriteString(": " + apiMsg)
	}
	return retry.Truncate(strings.ToValidUTF8(b.String(), "\uFFFD"))
}
