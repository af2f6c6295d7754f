package gemini

import (
	"net/http"

	"google.golang.org/genai"

	"github.com/agentledger/ledger/internal/retry"
)

// NoRetries returns retry options that make genai send each request once:
// one attempt, no retry. Set them as HTTPOptions.RetryOptions of a request
// that has its own HTTPOptions, since a request's RetryOptions replace the
// client's wholesale.
func NoRetries() *genai.HTTPRetryOptions {
	one := int32(1)
	return &genai.HTTPRetryOptions{Attempts: &one}
}

// ClientConfig returns a copy of base (nil is the zero config) with the
// SDK's HTTP retries off, for genai.NewClient. base is not modified; its
// headers and HTTP client are copied. The client's transport reports the
// progress of each stream to the middleware (retry.ProgressTransport), so
// that a stream is bounded by the policy's idle timeout after its first
// byte rather than by its attempt timeout as a whole.
//
// Automatic continuation is a per-request setting: build each request's
// config with GenerateContentConfig as well.
func ClientConfig(base *genai.ClientConfig) *genai.ClientConfig {
	var cc genai.ClientConfig
	if base != nil {
		cc = *base
		cc.HTTPOptions.Headers = base.HTTPOptions.Headers.Clone()
	}
	cc.HTTPOptions.RetryOptions = NoRetries()
	hc := &http.Client{}
	if cc.HTTPClient != nil {
		*hc = *cc.HTTPClient
	}
	hc.Transport = retry.ProgressTransport(hc.Transport)
	cc.HTTPClient = hc
	return &cc
}

// GenerateContentConfig returns a copy of base (nil is the zero config)
// with automatic continuation off, and with the SDK's HTTP retries off if
// base has HTTPOptions of its own, for GenerateContent and
// GenerateContentStream. base is not modified.
//
// With continuation on (the SDK's default), one call may send several
// billed requests: it follows a CONTINUATION finish reason with more, and
// reconnects a stream that drops after a checkpoint. Under the middleware
// each of those must be an attempt of its own. A caller that wants long
// generations resumed passes the response's continuation token in the next
// call's ContinuationToken itself.
func GenerateContentConfig(base *genai.GenerateContentConfig) *genai.GenerateContentConfig {
	var cfg genai.GenerateContentConfig
	if base != nil {
		cfg = *base
	}
	off := false
	cfg.AutomaticContinuation = &off
	if cfg.HTTPOptions != nil {
		opts := *cfg.HTTPOptions
		opts.Headers = cfg.HTTPOptions.Headers.Clone()
		opts.RetryOptions = NoRetries()
		cfg.HTTPOptions = &opts
	}
	return &cfg
}
