package main

import "github.com/agentledger/ledger/internal/projection"

// The aggregator runs under a soft memory limit (GOMEMLIMIT overrides it);
// see projection.LimitMemory.
func init() { projection.LimitMemory() }
