// Package natstest owns the test fixture every package shares: an embedded
// JetStream server per test on a random loopback port with its store in the
// test's temp dir, and a connection to it.
package natstest
