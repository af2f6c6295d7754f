package ledger

import "github.com/agentledger/ledger/internal/events"

// Usage is what a provider billed for one attempt, in tokens (wire
// contract v1). InputTokens counts every input token, cached ones
// included; the two cache fields are subsets of it.
type Usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
}

// Add returns the sum of u and v, field by field.
func (u Usage) Add(v Usage) Usage { return Usage(events.Usage(u).Add(events.Usage(v))) }

// Sub returns u minus v, field by field.
func (u Usage) Sub(v Usage) Usage { return Usage(events.Usage(u).Sub(events.Usage(v))) }
