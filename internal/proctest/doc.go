// Package proctest owns the helper-process pattern of the command tests:
// the test binary started again as the command itself, a real OS process
// that a test can kill with SIGKILL, with its output readable while it
// runs. A package that uses it calls Main from its TestMain.
package proctest
