package ledger

import "github.com/agentledger/ledger/api"

// Usage is what a provider billed for one attempt, in tokens (wire
// contract v1): InputTokens (every input token, cached ones included),
// OutputTokens, the two subsets of the input CacheReadInputTokens and
// CacheCreationInputTokens, CacheCreation1hInputTokens (the part of the
// cache write kept 1 hour; the rest is the 5-minute write) and
// ReasoningTokens (the part of the output spent reasoning). Its methods
// Add and Sub work field by field; IsZero reports a zero usage.
type Usage = api.Usage
