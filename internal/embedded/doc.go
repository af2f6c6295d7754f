// Package embedded owns the in-process NATS server that the commands start
// when no --nats-url or NATS_URL is given: JetStream on, its store and
// listen address taken from nats.conf.
package embedded
