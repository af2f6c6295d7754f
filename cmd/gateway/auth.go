package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"

	"github.com/agentledger/ledger/internal/cli"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/gateway"
)

// authFlags are the flags of client authentication.
type authFlags struct {
	keys     string
	insecure bool
	loaded   *gateway.Keys // by load
}

func (a *authFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.keys, "keys", "", "the client key file (JSON; see gateway key new): every request must present one of its keys, 401 otherwise")
	fs.BoolVar(&a.insecure, "insecure-no-auth", false, "serve a non-loopback --listen address without --keys: anyone who reaches it is trusted (warned at start)")
}

// validate refuses a non-loopback listen address without keys, unless
// insecure.
func (a *authFlags) validate(listen string) error {
	switch {
	case a.keys != "" && a.insecure:
		return cli.Usagef("--insecure-no-auth: not with --keys")
	case a.keys != "" || a.insecure:
		return nil
	}
	if !loopback(listen) {
		return cli.Usagef("--listen %s: not a loopback address, and there are no --keys: anyone who reaches it could spend the credentials it forwards and write to the ledger; give --keys FILE (gateway key new makes one), listen on 127.0.0.1, or pass --insecure-no-auth", listen)
	}
	return nil
}

// loopback reports whether addr (host:port) listens on loopback only: a
// loopback IP or "localhost". An empty host listens everywhere.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	host, _, _ = strings.Cut(host, "%")
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// load reads the key file, when there is one, into loaded, and warns
// when the gateway will serve without authentication beyond loopback.
func (a *authFlags) load(logger *slog.Logger) error {
	if a.keys == "" {
		if a.insecure {
			logger.Warn("gateway: serving without client keys (--insecure-no-auth): anyone who reaches the address can spend the credentials it forwards and write to the ledger")
		}
		return nil
	}
	keys, err := gateway.LoadKeys(a.keys, os.Getenv)
	if err != nil {
		return cli.Usagef("--keys: %v", err)
	}
	logger.Info("gateway: client keys loaded", "file", a.keys, "keys", keys.Len(), "names", keys.Names())
	if st, err := os.Stat(a.keys); err == nil && st.Mode().Perm()&0o077 != 0 && keys.HoldCredentials() {
		logger.Warn("gateway: the key file holds provider credentials and others may read it", "file", a.keys, "mode", st.Mode().Perm().String())
	}
	a.loaded = keys
	return nil
}

const keyUsage = `usage: gateway key new NAME

Makes a client key for the client NAME. Prints the key (give it to the
client; the gateway does not keep it) on the first line, and the entry of
the key file, with the key's SHA-256, on the second. Add the entry to the
"keys" array of the file --keys reads, with the key's rules:

  {"keys": [
    {"name": "team-a", "sha256": "<64 hex digits>",
     "session_prefix": "team-a-",            (or "session": "one-session")
     "account": "acme-prod",                 (optional: the guards' account)
     "credentials": {"anthropic": {"env": "TEAM_A_ANTHROPIC_KEY"},
                     "openai": {"value": "sk-..."}},
     "labels": {"team": "a"}}                (kept, not yet applied)
  ]}`

// isHelp reports whether args ask for keyCommand's usage: "-h", "help",
// or "new -h" (not a key for a client named "-h").
func isHelp(args []string) bool {
	if len(args) == 2 && args[0] == "new" {
		args = args[1:]
	}
	return len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help")
}

// keyCommand runs "gateway key new NAME".
func keyCommand(args []string, stdout, stderr io.Writer) int {
	if isHelp(args) {
		fmt.Fprintln(stdout, keyUsage)
		return cli.ExitOK
	}
	if len(args) != 2 || args[0] != "new" {
		fmt.Fprintln(stderr, keyUsage)
		return cli.ExitUsage
	}
	if err := events.ValidateID("NAME", args[1]); err != nil {
		fmt.Fprintf(stderr, "gateway key new: %v\n", err)
		return cli.ExitUsage
	}
	key, sum, err := gateway.NewKey()
	if err != nil {
		fmt.Fprintf(stderr, "gateway key new: %v\n", err)
		return cli.ExitFailed
	}
	entry, _ := json.Marshal(map[string]string{"name": args[1], "sha256": sum})
	fmt.Fprintf(stdout, "%s\n%s\n", key, entry)
	return cli.ExitOK
}
