package fakekit

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/http"
	"strconv"
	"strings"
)

// Headers by which a client names the logical call and attempt of a
// request: the session and request IDs follow events.IDRule, the attempt is
// the contract's attempt number (0 for the first). The fake provider
// answers a request without them 400.
const (
	HeaderSessionID = "X-Ledger-Session-Id"
	HeaderRequestID = "X-Ledger-Request-Id"
	HeaderAttempt   = "X-Ledger-Attempt"
)

// MaxBody bounds a request body the fake provider reads.
const MaxBody = 4 << 20

// RequestID is the provider's ID of an attempt, or of its response: prefix
// and a digest of the call.
func RequestID(prefix string, c Call) string {
	h := fnv.New64a()
	h.Write([]byte(c.RequestID))
	return fmt.Sprintf("%s%016x%02x", prefix, h.Sum64(), c.Attempt%256)
}

// ReplyText is the text of a successful answer to c.
func ReplyText(c Call) string {
	return "Simulated answer to " + c.RequestID + "."
}

// DecodeBody reads a JSON request body, at most MaxBody bytes, into dst.
func DecodeBody(w http.ResponseWriter, r *http.Request, dst any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBody))
	if err := dec.Decode(dst); err != nil {
		return fmt.Errorf("request body: %w", err)
	}
	return nil
}

// WriteJSON answers with a JSON body.
func WriteJSON(w http.ResponseWriter, status int, body any) {
	b, err := json.Marshal(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// RetryAfterHeaders sets the hint headers of a rate limit: retry-after-ms
// and retry-after (seconds, with milliseconds).
func RetryAfterHeaders(w http.ResponseWriter, d Decision) {
	ms := d.RetryAfter.Milliseconds()
	w.Header().Set("retry-after-ms", strconv.FormatInt(ms, 10))
	w.Header().Set("retry-after", strconv.FormatFloat(d.RetryAfter.Seconds(), 'f', 3, 64))
}

// SSE writes a server-sent event stream.
type SSE struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// StartSSE writes the headers of a stream of events (status 200).
func StartSSE(w http.ResponseWriter) *SSE {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return ResumeSSE(w)
}

// ResumeSSE continues a stream another StartSSE began on w.
func ResumeSSE(w http.ResponseWriter) *SSE {
	return &SSE{w: w, rc: http.NewResponseController(w)}
}

// Send writes one event (name may be empty), its data data as JSON, and
// flushes it.
func (s *SSE) Send(name string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	var sb strings.Builder
	if name != "" {
		sb.WriteString("event: ")
		sb.WriteString(name)
		sb.WriteString("\n")
	}
	sb.WriteString("data: ")
	sb.Write(b)
	sb.WriteString("\n\n")
	if _, err := s.w.Write([]byte(sb.String())); err != nil {
		return err
	}
	return s.rc.Flush()
}

// SendRaw writes one unnamed event whose data is given as it is.
func (s *SSE) SendRaw(data string) error {
	if _, err := s.w.Write([]byte("data: " + data + "\n\n")); err != nil {
		return err
	}
	return s.rc.Flush()
}
