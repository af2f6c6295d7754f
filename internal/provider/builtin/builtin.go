// Package builtin links the built-in providers, Anthropic, OpenAI and
// Gemini: importing it (for its side effect) registers each of them with
// package provider, so that provider.All, provider.Builtin and the
// registered classifiers and rate-limit headers hold them. The gateway's
// command, the tests of the packages that consult the registry, and
// ledgertest import it; the gateway and the guards themselves import
// package provider only.
package builtin

import (
	_ "github.com/agentledger/ledger/internal/provider/anthropic" // registers "anthropic"
	_ "github.com/agentledger/ledger/internal/provider/gemini"    // registers "gemini"
	_ "github.com/agentledger/ledger/internal/provider/openai"    // registers "openai"
)
