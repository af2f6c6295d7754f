// Package natstest owns the test fixture every package shares: an embedded
// JetStream server per test on a random loopback port with its store in the
// test's temp dir, and a connection to it; the same server restarted on its
// port and store (an outage that ends); and a server configured by the
// shipped roles example (examples/nats/roles.conf), with a URL per role
// and a way to take one grant away.
package natstest
