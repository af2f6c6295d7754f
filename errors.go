package ledger

import (
	"errors"
	"fmt"
)

// ErrInvalidOption is wrapped by every error about an option or argument
// of Connect, NewPublisher and NewMiddleware; the message names the option
// and the rule.
var ErrInvalidOption = errors.New("ledger: invalid option")

func invalid(option, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidOption, option, fmt.Sprintf(format, args...))
}
