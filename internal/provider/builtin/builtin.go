// Package builtin links every built-in provider: importing it (for its
// side effect) registers each of them in the provider registry
// (provider.Register, from the init of each provider's package). The
// programs and packages that serve or simulate every provider import it;
// a new built-in provider is one line here.
package builtin

import (
	// The built-in providers, registered by their init.
	_ "github.com/agentledger/ledger/internal/provider/anthropic"
	_ "github.com/agentledger/ledger/internal/provider/gemini"
	_ "github.com/agentledger/ledger/internal/provider/openai"
)
