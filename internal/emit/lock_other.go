//go:build !unix

package emit

import "os"

// lockDir opens the lock file; outside Unix it is not locked, so the
// directory must not be shared by two publishers.
func lockDir(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
}
