// Package e2e owns the end-to-end tests of the whole pipeline: a simulated
// fleet calling a fake provider through the retry middleware with the real
// SDK clients, publishing every attempt with the emit publisher onto an
// embedded JetStream server, and the aggregator projecting it; the ledger
// must equal the simulator's ground truth.
package e2e
