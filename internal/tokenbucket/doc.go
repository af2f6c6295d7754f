// Package tokenbucket owns the arithmetic of the per-minute rate limits of
// model providers, shared by the middleware's limiters (package guard), the
// fleet's shared state (package fleet) and the simulator's fake provider,
// so that the three agree on what a limit admits.
//
// A limit of L units per minute is a bucket of capacity C (L times the
// burst window over a minute) refilled continuously at L/60 units per
// second. A cost fits when the level is at least min(cost, C): a cost
// larger than the whole bucket goes through when the bucket is full,
// and then drives the level below zero, so that what follows waits until
// the debt is paid. Levels are float64 units (requests or tokens).
//
// Everything is a pure function of its arguments and the time passed in;
// the package keeps no clock and no state of its own.
package tokenbucket
