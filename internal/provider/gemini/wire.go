package gemini

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/genai"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/provider"
	"github.com/agentledger/ledger/internal/retry"
)

// This file serves callers that see the HTTP exchange itself rather than
// the SDK's types (the gateway): the same classification and usage rules,
// applied to status and raw JSON.

// ClassifyResponse classifies an HTTP error response of the API (status
// and body) as Classify classifies the genai.APIError the SDK makes of
// it, except that an error object without a code takes the response's
// status (the SDK leaves it 0). The Gemini API sends no hint in its
// headers.
func ClassifyResponse(status int, body []byte) retry.Classification {
	// The SDK's Status, for a body it cannot read, is the response's
	// status line.
	ae := genai.APIError{Code: status, Status: strconv.Itoa(status) + " " + http.StatusText(status)}
	if len(body) > 0 {
		var r struct {
			Error *genai.APIError `json:"error"`
		}
		switch err := json.Unmarshal(body, &r); {
		case err == nil && r.Error != nil:
			ae = *r.Error
			if ae.Code == 0 {
				ae.Code = status // the SDK leaves it 0; the response's status says more
			}
		default:
			ae.Message = string(body) // as the SDK does; Classify keeps it out of the event
		}
	}
	c, _ := Classify(ae, time.Time{})
	return c
}

// StreamError returns the error object of a chunk of a stream, if it is
// one, classified as Classify classifies the SDK's error for it.
func StreamError(data []byte) (retry.Classification, bool) {
	if !bytes.Contains(data, []byte(`"error"`)) {
		return retry.Classification{}, false
	}
	var r struct {
		Error *genai.APIError `json:"error"`
	}
	if json.Unmarshal(data, &r) != nil || r.Error == nil {
		return retry.Classification{}, false
	}
	c, _ := Classify(*r.Error, time.Time{})
	return c, true
}

// wireChunk is the part of a response (or a chunk of a stream) that the
// ledger reads.
type wireChunk struct {
	UsageMetadata *struct {
		PromptTokenCount        int32  `json:"promptTokenCount"`
		CandidatesTokenCount    int32  `json:"candidatesTokenCount"`
		CachedContentTokenCount int32  `json:"cachedContentTokenCount"`
		ToolUsePromptTokenCount int32  `json:"toolUsePromptTokenCount"`
		ThoughtsTokenCount      int32  `json:"thoughtsTokenCount"`
		ServiceTier             string `json:"serviceTier"`
	} `json:"usageMetadata"`
	ResponseID string `json:"responseId"`
}

func (c *wireChunk) usage() events.Usage {
	m := c.UsageMetadata
	return MetadataUsage(&genai.GenerateContentResponseUsageMetadata{
		PromptTokenCount:        m.PromptTokenCount,
		CandidatesTokenCount:    m.CandidatesTokenCount,
		CachedContentTokenCount: m.CachedContentTokenCount,
		ToolUsePromptTokenCount: m.ToolUsePromptTokenCount,
		ThoughtsTokenCount:      m.ThoughtsTokenCount,
	})
}

// ResponseUsage reads the usage, the responseId and the service tier
// (usageMetadata.serviceTier, ServiceTierOf) of a generateContent response
// body: one response object, or the JSON array of chunks that
// streamGenerateContent sends without alt=sse (the last chunk with usage
// metadata counts, as each is the running total). ok is false when no
// usage metadata is there.
func ResponseUsage(body []byte) (a provider.Answer, ok bool) {
	var chunks []wireChunk
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) > 0 && t[0] == '[' {
		if json.Unmarshal(body, &chunks) != nil {
			return provider.Answer{}, false
		}
	} else {
		var c wireChunk
		if json.Unmarshal(body, &c) != nil {
			return provider.Answer{}, false
		}
		chunks = []wireChunk{c}
	}
	var s StreamUsage
	for i := range chunks {
		if id := s.take(&chunks[i]); id != "" {
			a.ProviderID = id
		}
		ok = ok || chunks[i].UsageMetadata != nil
	}
	a.Usage, a.ServiceTier = s.Usage(), s.ServiceTier()
	return a, ok
}

// ObserveRaw takes one chunk of a stream into account as it came over the
// wire (the data of one event), as Observe, and returns its responseId
// ("" when it has none or it does not fit the contract).
func (s *StreamUsage) ObserveRaw(data []byte) (responseID string, err error) {
	var c wireChunk
	if err := json.Unmarshal(data, &c); err != nil {
		return "", err
	}
	return s.take(&c), nil
}

// take takes one chunk's usage and service tier, and returns its
// responseId as responseIDOf keeps it.
func (s *StreamUsage) take(c *wireChunk) (responseID string) {
	if c.UsageMetadata != nil {
		s.usage = c.usage()
		if tier := ServiceTierOf(c.UsageMetadata.ServiceTier); tier != "" {
			s.tier = tier
		}
	}
	return responseIDOf(c.ResponseID)
}

// responseIDOf keeps a responseId that fits the contract.
func responseIDOf(id string) string {
	id = strings.TrimSpace(id)
	if len(id) > events.MaxProviderReqID || !utf8.ValidString(id) {
		return ""
	}
	return id
}
