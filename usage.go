package ledger

import "github.com/agentledger/ledger/api"

// Usage is what a provider billed for one attempt, in tokens (wire
// contract v1): InputTokens (every input token, cached ones included),
// OutputTokens, and the two subsets of the input CacheReadInputTokens and
// CacheCreationInputTokens. Its methods Add and Sub work field by field;
// IsZero reports a zero usage.
type Usage = api.Usage
