package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit statuses (see the package documentation).
const (
	ExitOK     = 0
	ExitFailed = 1
	ExitUsage  = 2
)

// ExitError ends a command with Code. Err is the message for stderr; nil
// when the command has already said why (the flag package, for a bad
// flag).
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return ""
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// Usagef is an ExitUsage error with a formatted message (%w wraps).
func Usagef(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// Failed is an ExitFailed error: the command ran and the answer is no.
func Failed(err error) error { return &ExitError{Code: ExitFailed, Err: err} }

// Said is an ExitUsage error whose reason is already on stderr.
var Said error = &ExitError{Code: ExitUsage}

// Code is the exit status of a command that returned err: 0 for nil and
// flag.ErrHelp, an ExitError's Code, and ExitUsage for any other error.
func Code(err error) int {
	var ee *ExitError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.As(err, &ee):
		return ee.Code
	}
	return ExitUsage
}

// Report writes err to stderr as "name: err" (unless it is flag.ErrHelp
// or has no message) and returns its exit status.
func Report(name string, stderr io.Writer, err error) int {
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		if msg := err.Error(); msg != "" {
			fmt.Fprintf(stderr, "%s: %s\n", name, msg)
		}
	}
	return Code(err)
}

// Main runs a command with os.Args[1:] and the standard streams, under a
// context that SIGINT or SIGTERM cancels, and exits with the status run
// returns.
func Main(run func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Parse parses a command's flags: -h is flag.ErrHelp (exit 0), a bad flag
// Said (exit 2: the flag package has written why).
func Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return Said
	}
	return nil
}
