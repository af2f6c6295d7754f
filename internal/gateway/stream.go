package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/agentledger/ledger/internal/provider"
	"github.com/agentledger/ledger/internal/retry"
)

// stream relays a server-sent event stream to the client event by event,
// flushing after each, and follows its usage. Until its first event
// nothing reaches the client, so a failure is retried; a first event that
// is an error is kept to relay, should the attempt be the last. From the
// first event on the call is committed: a failure ends it (the client's
// response is cut), with what the stream reported so far.
//
// With Config.Prices, a committed stream's answer announces HeaderCost as
// a trailer (its headers leave before the usage is known) and sets it
// once the stream has ended: the cost of what the stream reported, priced
// as the answers that are not streamed are.
func (c *call) stream(actx context.Context, dl *deadline, resp *http.Response, a retry.Attempt) (retry.Report, error) {
	rep, err := c.relay(actx, dl, resp, a)
	if c.committed && c.g.cfg.Prices != nil {
		c.w.Header().Set(HeaderCost, c.cost(rep.Usage, rep.ServiceTier))
	}
	return rep, err
}

// relay is stream's relay of the events and their usage.
func (c *call) relay(actx context.Context, dl *deadline, resp *http.Response, a retry.Attempt) (retry.Report, error) {
	acc := c.t.u.p.NewStream(c.t.rt, resp.Header, c.req)
	rd := newSSEReader(resp.Body, int(c.g.cfg.MaxResponseBytes))
	report := func() retry.Report {
		r := retry.Report{Usage: sanitize(acc.Usage()), ProviderRequestID: acc.ProviderID(), ServiceTier: acc.ServiceTier(), Header: resp.Header}
		if e, ok := acc.(provider.InputEstimator); ok {
			// The usage never came: the input estimated from the request,
			// recorded apart from the usage (estimated_input_tokens),
			// within Limits.MaxEstimates.
			r.EstimatedInputTokens = c.estimate(e)
		}
		return r
	}
	ev, err := rd.next()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = errStreamCut
		}
		return report(), c.failure(actx, err)
	}
	v := acc.Observe(ev.name, ev.data)
	if v.Error {
		return report(), c.firstEventError(resp, rd, ev)
	}
	c.commit(resp, a)
	rc := http.NewResponseController(c.w)
	var errData []byte
	for {
		if v.Error && errData == nil {
			errData = bytes.Clone(ev.data)
		}
		if !v.Drop {
			_, err := c.w.Write(ev.raw)
			if err == nil {
				err = rc.Flush()
			}
			if err != nil {
				if errData != nil {
					// The client left after the stream's error event
					// reached it (the SDKs stop there): the upstream's
					// error ended the call, not the client.
					return report(), c.streamError(resp, errData)
				}
				return report(), c.clientGone()
			}
		}
		dl.extend(c.g.cfg.StreamIdleTimeout)
		if ev, err = rd.next(); err != nil {
			break
		}
		v = acc.Observe(ev.name, ev.data)
	}
	switch {
	case errData != nil:
		// An error event ends the call with the upstream's error, however
		// the stream ends after it: the client that read it may leave at
		// once, canceling the read of the rest.
		return report(), c.streamError(resp, errData)
	case !errors.Is(err, io.EOF) && !acc.Complete():
		// After the stream's terminal event the client has all of it and
		// may leave at once (the SDKs close on [DONE]), canceling the
		// request and so the read of the upstream's last bytes: that is
		// the end, not a failure.
		return report(), c.failure(actx, err)
	case !acc.Complete():
		return report(), c.failure(actx, errStreamCut)
	}
	return report(), nil
}

// commit sends the response's status and headers: from here on the call
// ends with this attempt.
func (c *call) commit(resp *http.Response, a retry.Attempt) {
	clientHeader(c.w.Header(), resp.Header)
	c.w.Header().Set(HeaderRequestID, a.RequestID)
	if c.g.cfg.Prices != nil {
		// Its value is known once the stream has ended (see stream).
		c.w.Header().Set("Trailer", HeaderCost)
	}
	c.w.WriteHeader(resp.StatusCode)
	c.committed = true
}

// firstEventError is the failure of a stream whose first event is an
// error: nothing reached the client, so it may be retried, and the stream
// (the rest of it, within the limit) is kept to relay if it is not.
func (c *call) firstEventError(resp *http.Response, rd *sseReader, ev *sseEvent) error {
	body := bytes.Clone(ev.raw)
	rest, _ := io.ReadAll(io.LimitReader(rd.r, maxErrorBody))
	body = append(body, rest...)
	return &attemptError{
		p: c.t.u.p, streamErr: bytes.Clone(ev.data), header: resp.Header, secrets: c.secrets,
		relay: &upstreamResponse{status: resp.StatusCode, header: resp.Header, body: body},
	}
}

// streamError is the failure of a stream that relayed an error event
// (its data errData) to the client.
func (c *call) streamError(resp *http.Response, errData []byte) error {
	return &attemptError{p: c.t.u.p, streamErr: errData, header: resp.Header, committed: true, relayed: true, secrets: c.secrets}
}

// clientGone is the failure of an attempt whose client stopped reading.
func (c *call) clientGone() error {
	return &attemptError{p: c.t.u.p, cause: errClientGone, committed: true, secrets: c.secrets}
}
