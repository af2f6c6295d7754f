package natstest

import (
	"net/url"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Roles are the users of the shipped roles example (examples/nats/roles.conf).
var Roles = []string{"publisher", "agent", "gateway", "aggregator", "reader", "operator"}

// RolesConfig is the path of the shipped example with the ledger's NATS
// roles.
func RolesConfig() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "examples", "nats", "roles.conf")
}

// InboxPrefix is the inbox prefix the roles example grants role.
func InboxPrefix(role string) string { return "_INBOX_" + role }

// rolePassword is the test password of role.
func rolePassword(role string) string { return "test-secret-" + role }

// StartRoles runs a JetStream server configured by the shipped roles
// example, exactly as a deployment would load it, on a random port and a
// store of the test's; options change it (WithoutGrant) before it starts.
// Each role's password comes from the environment the file names, so the
// test cannot run in parallel with others that set it.
func StartRoles(t testing.TB, options ...Option) *Server {
	t.Helper()
	for _, role := range Roles {
		t.Setenv("LEDGER_"+strings.ToUpper(role)+"_PASSWORD", rolePassword(role))
	}
	opts, err := server.ProcessConfigFile(RolesConfig())
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	opts.Host, opts.Port, opts.StoreDir, opts.NoLog, opts.NoSigs = "127.0.0.1", server.RANDOM_PORT, t.TempDir(), true, true
	return start(t, opts, options)
}

// RoleURL is the server's URL with role's user and password.
func (s *Server) RoleURL(role string) string {
	u, err := url.Parse(s.URL())
	if err != nil {
		panic(err)
	}
	u.User = url.UserPassword(role, rolePassword(role))
	return u.String()
}

// WithoutGrant takes subject out of role's publish and subscribe grants,
// as a deployment that forgot one would. It denies it too: an allow list
// left empty would otherwise allow everything.
func WithoutGrant(role, subject string) Option {
	return func(o *server.Options) {
		for _, u := range o.Users {
			if u.Username != role || u.Permissions == nil {
				continue
			}
			for _, p := range []*server.SubjectPermission{u.Permissions.Publish, u.Permissions.Subscribe} {
				if p != nil && slices.Contains(p.Allow, subject) {
					p.Allow = slices.DeleteFunc(p.Allow, func(s string) bool { return s == subject })
					p.Deny = append(p.Deny, subject)
				}
			}
		}
	}
}

// RoleArgs are the connection flags of a command run as role: its URL and
// its inbox prefix.
func (s *Server) RoleArgs(role string) []string {
	return []string{"--nats-url", s.RoleURL(role), "--inbox-prefix", InboxPrefix(role)}
}

// ConnectAs opens a connection as role, with its inbox prefix, closed at
// cleanup.
func (s *Server) ConnectAs(t testing.TB, role string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(s.RoleURL(role), nats.CustomInboxPrefix(InboxPrefix(role)))
	if err != nil {
		t.Fatalf("natstest: connect as %s: %v", role, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("natstest: jetstream: %v", err)
	}
	return nc, js
}
