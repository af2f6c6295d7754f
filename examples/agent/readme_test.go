package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentledger/ledger"
)

// The README's agent snippet is this module's code, from config's doc
// comment to the end of run, so that it compiles and is tested.
func TestREADMESnippetIsTheAgent(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	const section = "## Wiring an agent with the public packages"
	_, after, ok := strings.Cut(string(readme), section)
	if !ok {
		t.Fatalf("the README has no section %q", section)
	}
	_, block, ok := strings.Cut(after, "```go\n")
	if !ok {
		t.Fatalf("the README's section %q has no Go block", section)
	}
	snippet, _, ok := strings.Cut(block, "```")
	if !ok {
		t.Fatal("the README's Go block does not end")
	}
	const from = "// config is one call to make."
	_, code, ok := strings.Cut(string(src), from)
	if !ok {
		t.Fatalf("main.go has no %q", from)
	}
	if got, want := strings.TrimSpace(snippet), strings.TrimSpace(from+code); got != want {
		t.Errorf("the README's agent snippet differs from main.go (copy main.go from %q to the end into the README):\n%s",
			from, firstDifference(got, want))
	}
}

// firstDifference shows the first line where got and want differ.
func firstDifference(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d:\nREADME:  %s\nmain.go: %s", i+1, gl, wl)
		}
	}
	return ""
}

// With NATS down the agent returns the *ledger.ConnectError, which says
// which server refused; it does not panic.
func TestAgentNATSDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "nats://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	_, err = run(t.Context(), config{Session: "s", Model: "m", Prompt: "hi"}, ledger.WithURL(url), ledger.WithConnectTimeout(5*time.Second))
	var ce *ledger.ConnectError
	if !errors.As(err, &ce) {
		t.Fatalf("run with NATS down: %v (%T); want a *ledger.ConnectError", err, err)
	}
	if !errors.Is(err, ledger.ErrRefused) || !strings.Contains(err.Error(), ln.Addr().String()) {
		t.Errorf("the error %q does not name the server %s", err, ln.Addr())
	}
}
