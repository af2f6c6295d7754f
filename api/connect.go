package api

import (
	"errors"
	"fmt"
)

// ErrRefused is wrapped by every *ConnectError: the NATS server could not
// be reached or refused the connection.
var ErrRefused = errors.New("ledger: connection refused")

// ConnectError is a connection to NATS that failed: which server, what
// the client offered, what went wrong in words, and the NATS client's
// error. It never contains a password, token or seed.
type ConnectError struct {
	// Server is the URL or URLs, without their credentials.
	Server string
	// Offered says what was offered: the kind of credential and the file,
	// NKEY or JWT subject it came from, the CA and client certificate.
	Offered string
	// Refused says what the server refused, or why it could not be reached.
	Refused string
	// Err is the NATS client's error.
	Err error
}

func (e *ConnectError) Error() string {
	return fmt.Sprintf("ledger: connect: %s: %s (offered: %s): %v", e.Server, e.Refused, e.Offered, e.Err)
}

// Unwrap returns ErrRefused and the client's error.
func (e *ConnectError) Unwrap() []error { return []error{ErrRefused, e.Err} }
