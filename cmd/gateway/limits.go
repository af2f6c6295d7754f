package main

import (
	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/cli"
	"github.com/agentledger/ledger/internal/guard"
)

// guardConfig is the configuration of the upstreams' guards the flags
// ask for: the breaker, the rate limits learned from the providers'
// headers and set by --limit / --limits-file (an upstream with none is
// given one inferred from its 429s), the retry budget of the
// --retry-budget-* flags, and the attempt timeout (a fleet probe's claim
// lasts at least that long).
func (f *flags) guardConfig() (guard.Config, error) {
	cfg := guard.Standard(breaker.Config{FailureThreshold: f.breakerThreshold, Cooldown: f.breakerCooldown})
	cfg.AttemptTimeout = f.attemptTimeout
	if err := f.guardSets.Apply(&cfg); err != nil {
		return cfg, cli.Usagef("%v", err)
	}
	return cfg, nil
}
