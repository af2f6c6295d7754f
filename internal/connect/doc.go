// Package connect owns how the commands reach NATS: the --nats-url flag or
// NATS_URL, and, for the aggregator when neither is given, an embedded
// server started from nats.conf.
package connect
