// Package progress owns how long-running commands (verify, rebuild, the
// point-in-time report) tell a person how far they have got: on a terminal,
// one line redrawn in place with the events done, the rate and the time
// left; elsewhere (a log file, CI), a plain line now and then.
package progress
