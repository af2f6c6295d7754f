package proctest

import (
	"os"
	"os/exec"
	"testing"
)

// env marks a process started by Start: it runs the command, not the tests.
const env = "LEDGER_PROCTEST_CHILD"

// Main runs main instead of the tests when this process was started by
// Start; call it first in TestMain. main is expected to exit.
func Main(main func()) {
	if os.Getenv(env) == "1" {
		main()
		os.Exit(0)
	}
}

// Output is a file a child writes to directly, readable while it runs.
type Output struct{ f *os.File }

func (o Output) String() string {
	b, _ := os.ReadFile(o.f.Name())
	return string(b)
}

// Process is a running child.
type Process struct {
	Cmd            *exec.Cmd
	Stdout, Stderr Output
}

// Start runs the test binary as the command with args, stdin (nil: none;
// an *os.File is handed over as it is, so that no goroutine of the test
// copies it), and kills it at cleanup if it is still running.
func Start(t testing.TB, stdin *os.File, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), env+"=1")
	stdout, err := os.CreateTemp(t.TempDir(), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stdout.Close(); _ = stderr.Close() })
	if stdin != nil {
		cmd.Stdin = stdin
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return &Process{Cmd: cmd, Stdout: Output{stdout}, Stderr: Output{stderr}}
}
