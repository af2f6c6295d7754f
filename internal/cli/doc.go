// Package cli owns what the ledger's commands (aggregator, publisher,
// gateway) share at their edges, so that they exit and report failures
// the same way: the exit statuses, the error that carries one, a main
// that stops on SIGINT or SIGTERM, and the --labels flag (Labels).
//
// Exit statuses, the same for every command:
//
//	0  done (or -h)
//	1  the command ran and the answer is no: drift, events undelivered,
//	   invalid input lines, a wait that timed out
//	2  it could not do its work: bad flags, NATS unreachable, a runtime
//	   error, interrupted
package cli
