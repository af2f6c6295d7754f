package connect

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// ErrPermission is wrapped by every *PermissionError.
var ErrPermission = errors.New("connect: NATS permission denied")

// PermissionError is a permission violation the server reported: the
// connection's user may not publish to, or subscribe to, Subject. The
// server drops the message and tells the client asynchronously; a request
// on that subject would otherwise only time out.
type PermissionError struct {
	// Op is "publish" or "subscribe".
	Op string
	// Subject is the subject refused.
	Subject string
	// Err is the client library's error.
	Err error
}

func (e *PermissionError) Error() string {
	return fmt.Sprintf("%v: the NATS user may not %s %q; grant it in the user's permissions (see docs/security.md for each role's) or use a user that has it: %v",
		ErrPermission, e.Op, e.Subject, e.Err)
}

// Unwrap returns ErrPermission and the client's error.
func (e *PermissionError) Unwrap() []error { return []error{ErrPermission, e.Err} }

var violation = regexp.MustCompile(`(?i)permissions violation for (publish|subscription) to "?([^"\s]+)"?`)

// parsePermission reads the operation and subject out of the server's
// -ERR 'Permissions Violation for Publish to "subject"'.
func parsePermission(err error) *PermissionError {
	pe := &PermissionError{Op: "use", Subject: "?", Err: err}
	if m := violation.FindStringSubmatch(err.Error()); m != nil {
		pe.Op, pe.Subject = strings.ToLower(m[1]), m[2]
		if pe.Op == "subscription" {
			pe.Op = "subscribe to"
		} else {
			pe.Op = "publish to"
		}
	}
	return pe
}

// deny records the first permission violation and ends every context of
// Guard.
func (c *Conn) deny(err error) {
	c.denyOnce.Do(func() {
		c.denial = parsePermission(err)
		close(c.denied)
	})
}

// Denied returns the first permission violation the server reported on
// this connection (a *PermissionError), or nil.
func (c *Conn) Denied() error {
	select {
	case <-c.denied:
		return c.denial
	default:
		return nil
	}
}

// Guard returns a context that ends, with the *PermissionError as its
// cause, as soon as the server reports a permission violation on this
// connection: work done under it stops within a moment instead of waiting
// for a reply that will never come. The caller must call cancel.
func (c *Conn) Guard(ctx context.Context) (context.Context, context.CancelFunc) {
	gctx, cancel := context.WithCancelCause(ctx)
	go func() { // ends with gctx at the latest
		select {
		case <-c.denied:
			cancel(c.denial)
		case <-gctx.Done():
		}
	}()
	return gctx, func() { cancel(context.Canceled) }
}

// Explain returns the permission violation, when the server reported one,
// in place of err (which is then only its consequence: a context canceled
// or a request timed out), with err's text appended; otherwise err.
func (c *Conn) Explain(err error) error {
	d := c.Denied()
	var pe *PermissionError
	switch {
	case d == nil || errors.As(err, &pe):
		return err
	case err == nil:
		return d
	}
	return fmt.Errorf("%w (then: %v)", d, err)
}
