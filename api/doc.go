// Package api declares the values that a Go agent and the ledger exchange:
// a model call and its attempts (Call, Attempt, Report), what an attempt
// used (Usage), how a failed one is classified (Classification,
// Classifier, ErrorKind), how a call is retried (Policy) and why it ended
// (StopReason), the counters of the middleware and the publisher, and the
// errors of a refused connection (ConnectError) and of events a closing
// publisher could not deliver (UndeliveredError), and a call's labels
// (Labels, with the contract's rules and their text form: Validate,
// LabelError, ParseLabels, FormatLabels).
//
// Import github.com/agentledger/ledger rather than this package: it gives
// every type here the same name (ledger.Usage is api.Usage, one type, so
// no conversion is ever needed between them), with the middleware and
// the publisher that use them. This package exists so that the ledger's
// own implementation uses the very types its users do, the way package os
// gives io/fs's FileMode its name. It imports nothing but the standard
// library.
package api
