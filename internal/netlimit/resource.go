package netlimit

import (
	"errors"
	"syscall"
)

// isResourceError reports whether err is a want of resources (file
// descriptors, buffers) or a connection aborted before it was accepted:
// errors an accept loop outlives.
func isResourceError(err error) bool {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EINTR} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
