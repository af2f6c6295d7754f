package api

// Usage is what a provider billed for one attempt, in tokens (wire
// contract v1). InputTokens counts every input token, cached ones
// included; the two cache fields are subsets of it.
// CacheCreation1hInputTokens is the part of CacheCreationInputTokens
// written to the 1-hour cache (Anthropic prices it apart; the rest is the
// 5-minute write). ReasoningTokens is the part of OutputTokens the model
// spent thinking (OpenAI reasoning, Gemini thoughts): OutputTokens counts
// every token billed as output, reasoning included. The two subsets are
// omitted from the JSON when zero, so an event or record without them
// reads and writes back as before they existed.
type Usage struct {
	InputTokens                int64 `json:"input_tokens"`
	OutputTokens               int64 `json:"output_tokens"`
	CacheReadInputTokens       int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens   int64 `json:"cache_creation_input_tokens"`
	CacheCreation1hInputTokens int64 `json:"cache_creation_1h_input_tokens,omitempty"`
	ReasoningTokens            int64 `json:"reasoning_tokens,omitempty"`
}

// Add returns the sum of u and v, field by field.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:                u.InputTokens + v.InputTokens,
		OutputTokens:               u.OutputTokens + v.OutputTokens,
		CacheReadInputTokens:       u.CacheReadInputTokens + v.CacheReadInputTokens,
		CacheCreationInputTokens:   u.CacheCreationInputTokens + v.CacheCreationInputTokens,
		CacheCreation1hInputTokens: u.CacheCreation1hInputTokens + v.CacheCreation1hInputTokens,
		ReasoningTokens:            u.ReasoningTokens + v.ReasoningTokens,
	}
}

// Sub returns u minus v, field by field.
func (u Usage) Sub(v Usage) Usage {
	return Usage{
		InputTokens:                u.InputTokens - v.InputTokens,
		OutputTokens:               u.OutputTokens - v.OutputTokens,
		CacheReadInputTokens:       u.CacheReadInputTokens - v.CacheReadInputTokens,
		CacheCreationInputTokens:   u.CacheCreationInputTokens - v.CacheCreationInputTokens,
		CacheCreation1hInputTokens: u.CacheCreation1hInputTokens - v.CacheCreation1hInputTokens,
		ReasoningTokens:            u.ReasoningTokens - v.ReasoningTokens,
	}
}

// IsZero reports whether every field is zero.
func (u Usage) IsZero() bool { return u == Usage{} }

// ErrorKind classifies why an attempt failed (wire contract v1).
type ErrorKind string

// The error kinds of wire contract v1.
const (
	KindRateLimit   ErrorKind = "rate_limit"
	KindOverloaded  ErrorKind = "overloaded"
	KindTimeout     ErrorKind = "timeout"
	KindConnection  ErrorKind = "connection"
	KindServer      ErrorKind = "server"
	KindClient      ErrorKind = "client"
	KindAuth        ErrorKind = "auth"
	KindQuota       ErrorKind = "quota"
	KindCanceled    ErrorKind = "canceled"
	KindCircuitOpen ErrorKind = "circuit_open"
	KindOther       ErrorKind = "other"
)

// Valid reports whether k is one of the kinds of wire contract v1. The
// middleware records a classification of another kind as KindOther.
func (k ErrorKind) Valid() bool {
	switch k {
	case KindRateLimit, KindOverloaded, KindTimeout, KindConnection, KindServer,
		KindClient, KindAuth, KindQuota, KindCanceled, KindCircuitOpen, KindOther:
		return true
	}
	return false
}
