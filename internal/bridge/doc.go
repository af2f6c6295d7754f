// Package bridge owns the conversions between the internal packages'
// types and the public ones that the provider and ledgertest packages
// need (package ledger converts its own): a provider classifier of the
// retry package as a ledger.Classifier.
package bridge
