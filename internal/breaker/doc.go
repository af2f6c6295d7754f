// Package breaker owns the circuit breaker kept per upstream (provider and
// model) that the retry middleware consults before every attempt: a small
// state machine that stops sending calls to an upstream that keeps failing
// and lets a single probe find out when it has recovered.
//
// # States
//
//   - Closed: every call is admitted. FailureThreshold consecutive Failure
//     results open the circuit; a Success resets the count; Ignore (client
//     errors, cancellations: outcomes that say nothing about the upstream's
//     health) changes nothing.
//   - Open: every call is rejected at once with an *OpenError until Cooldown
//     has passed since the circuit opened.
//   - HalfOpen: after the cooldown exactly one probe at a time is admitted;
//     every other caller is rejected while it is in flight. The probe's
//     Success closes the circuit, its Failure reopens it with a fresh
//     cooldown, and Ignore frees the probe slot so that the next caller may
//     probe. A probe that is never reported does not wedge the breaker: once
//     it has been in flight for Cooldown, another probe is admitted and the
//     first one's late result is dropped.
//
// # Permits and generations
//
// Allow hands out a Permit that the caller must pass back to Done exactly
// once with the call's Result. A Permit carries the generation it was issued
// in; the generation advances on every state change and on every probe
// admission, and Done drops results from any other generation (and a
// second report of a probe whose slot was already freed).
// So a call admitted while Closed that fails after the circuit has opened
// and gone half-open cannot touch the probe, and a replaced probe's late
// result cannot close or reopen the circuit.
//
// # Time and concurrency
//
// Every decision that depends on time reads Config.Now; the package starts
// no goroutines and no timers: the Open to HalfOpen transition happens
// lazily, in the first Allow (or State) after the cooldown. A Breaker and a
// Group are safe for concurrent use; Allow and Done on the admitted path
// take one short mutex section and do not allocate.
package breaker
