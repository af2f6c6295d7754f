package api_test

import (
	"errors"
	"fmt"

	"github.com/agentledger/ledger/api"
)

// A Usage adds up field by field; Validate names the field of a Policy
// that breaks its rule.
func Example() {
	billed := api.Usage{InputTokens: 1200, OutputTokens: 300, CacheReadInputTokens: 1000}
	retry := api.Usage{InputTokens: 1200, OutputTokens: 280, CacheReadInputTokens: 1000}
	fmt.Println(billed.Add(retry).InputTokens, billed.Sub(retry).OutputTokens)

	p := api.DefaultPolicy()
	p.MaxDelay = p.BaseDelay / 2
	err := p.Validate()
	var pe *api.PolicyError
	fmt.Println(errors.Is(err, api.ErrInvalidPolicy), errors.As(err, &pe) && pe.Field == "MaxDelay")
	fmt.Println(err)
	// Output:
	// 2400 20
	// true true
	// ledger: invalid policy: MaxDelay is 500ms; it must be at least BaseDelay (1s)
}

// Kinds outside wire contract v1 are not Valid; the middleware records
// them as KindOther.
func ExampleErrorKind_Valid() {
	fmt.Println(api.KindRateLimit.Valid(), api.ErrorKind("teapot").Valid())
	// Output: true false
}
