// Package embedded owns the in-process NATS server that the commands start
// when no --nats-url or NATS_URL is given: JetStream on, its store and
// listen address taken from nats.conf, and durable by default: every
// write is synced to disk before it is acknowledged (sync_interval:
// always), unless the configuration sets another sync_interval (see
// DurableDefaults and the contract's Durability section).
package embedded
