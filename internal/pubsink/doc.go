// Package pubsink lends the ledger's other public packages (gateway) what
// a *ledger.Publisher holds: its publisher of attempt events, as the
// retry middleware's Sink, without a public method that would show an
// internal type. Package ledger registers the function in its init;
// nothing else does.
package pubsink
