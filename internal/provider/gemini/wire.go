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
		PromptTokenCount        int32 `json:"promptTokenCount"`
		CandidatesTokenCount    int32 `json:"candidatesTokenCount"`
		CachedContentTokenCount int32 `json:"cachedContentTokenCount"`
		ToolUsePromptTokenCount int32 `json:"toolUsePromptTokenCount"`
		ThoughtsTokenCount      int32 `json:"thoughtsTokenCount"`
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

// ResponseUsage reads the usage and the responseId of a generateContent
// response body: one response object, or the JSON array of chunks that
// streamGenerateContent sends without alt=sse (the last chunk with usage
// metadata counts, as each is the running total). ok is false when no
// usage metadata is there.
func ResponseUsage(body []byte) (u events.Usage, responseID string, ok bool) {
	var chunks []wireChunk
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) > 0 && t[0] == '[' {
		if json.Unmarshal(body, &chunks) != nil {
			return events.Usage{}, "", false
		}
	} else {
		var c wireChunk
		if json.Unmarshal(body, &c) != nil {
			return events.Usage{}, "", false
		}
		chunks = []wireChunk{c}
	}
	for i := range chunks {
		if id := responseIDOf(chunks[i].ResponseID); id != "" {
			responseID = id
		}
		if chunks[i].UsageMetadata != nil {
			u, ok = chunks[i].usage(), true
		}
	}
	return u, responseID, ok
}

// ObserveRaw takes one chunk of a stream into account as it came over the
// wire (the data of one event), as Observe, and returns its responseId
// ("" when it has none or it does not fit the contract).
func (s *StreamUsage) ObserveRaw(data []byte) (responseID string, err error) {
	var c wireChunk
	if err := json.Unmarshal(data, &c); err != nil {
		return "", err
	}
	if c.UsageMetadata != nil {
		s.usage = c.usage()
	}
	return responseIDOf(c.ResponseID), nil
}

// responseIDOf keeps a responseId that fits the contract.
func responseIDOf(id string) string {
	id = strings.TrimSpace(id)
	if len(id) > events.MaxProviderReqID || !utf8.ValidString(id) {
		return ""
	}
	return id
}
