package gateway

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/provider"
	"github.com/agentledger/ledger/internal/retry"
)

// upstreamResponse is an upstream answer the gateway holds, to relay it to
// the client after the last attempt: an error response, or the start of a
// stream whose first event was an error.
type upstreamResponse struct {
	status int
	header http.Header
	body   []byte
	cost   string // HeaderCost's value; "" for none
}

// attemptError is how an attempt failed. Exactly one of resp (an HTTP
// error response), streamErr (the data of an error event inside a
// stream) and cause (a transport failure, a timeout, the client gone) is
// set, besides relay.
type attemptError struct {
	p         provider.Provider
	resp      *upstreamResponse
	streamErr []byte
	header    http.Header // the response's, for streamErr
	cause     error
	// relay is what to send the client if this was the last attempt and
	// nothing has been sent yet: resp, or the stream received so far.
	relay *upstreamResponse
	// committed: the answer had begun to reach the client, so the call
	// ends here; relayed: and all of the upstream's stream was relayed
	// (it ended with its own error event), so the client's response ends
	// normally rather than being cut.
	committed, relayed bool
	secrets            secrets
}

func (e *attemptError) Error() string {
	switch {
	case e.resp != nil:
		return "upstream answered " + http.StatusText(e.resp.status)
	case e.streamErr != nil:
		return "upstream sent an error event in the stream"
	}
	return e.secrets.redact(e.cause.Error())
}

func (e *attemptError) Unwrap() error { return e.cause }

// Settled: an error event of the upstream's stream reached the client;
// the client leaving after it does not make the call the client's
// cancellation (retry.Settled).
func (e *attemptError) Settled() bool { return e.streamErr != nil && e.relayed }

// errAttemptTimeout and errIdleTimeout end an attempt that waited too
// long for its answer, or for the next event of its stream. They are
// timeouts, which the classification retries (before the first byte).
var (
	errAttemptTimeout = timeoutError("the upstream did not answer within the attempt timeout")
	errIdleTimeout    = timeoutError("the upstream's stream was silent for longer than the stream idle timeout")
	errStreamCut      = errors.New("the upstream's stream ended before its end event")
	errClientGone     = errors.New("the client went away")
)

// timeoutError is a net.Error that is a timeout.
type timeoutError string

func (e timeoutError) Error() string   { return string(e) }
func (e timeoutError) Timeout() bool   { return true }
func (e timeoutError) Temporary() bool { return true }

// classifier classifies the gateway's attemptErrors: an upstream error
// response or error event by its provider's rules (the same as for the
// provider's SDK), transport failures by retry.ClassifyTransport. A
// failure after the answer began to reach the client is not retryable,
// whatever its kind. Credentials are redacted from the message.
type classifier struct{}

func (classifier) Classify(err error, now time.Time) (retry.Classification, bool) {
	var ae *attemptError
	if !errors.As(err, &ae) {
		return retry.Classification{}, false
	}
	var c retry.Classification
	switch {
	case ae.resp != nil:
		c = ae.p.ClassifyResponse(ae.resp.status, ae.resp.header, ae.resp.body, now)
	case ae.streamErr != nil:
		c = ae.p.ClassifyStreamError(ae.header, ae.streamErr, now)
	case errors.Is(ae.cause, errClientGone):
		c = retry.Classification{Kind: events.KindCanceled, Message: ae.cause.Error()}
	default:
		var ok bool
		if c, ok = retry.ClassifyTransport(context.Background(), ae.cause); !ok {
			c = retry.Classification{Kind: events.KindOther}
		}
		c.Message = ae.cause.Error()
	}
	if ae.committed {
		c.Retryable, c.HasHint = false, false
	}
	c.Message = ae.secrets.redact(c.Message)
	return c, true
}
