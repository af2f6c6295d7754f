package connect

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// settings is what Open connects with once the options, the environment
// and the context are merged.
type settings struct {
	urls                  string
	creds, nkey           string
	ca, cert, key         string
	user, password, token string // from a context; the URL's stay in the URL
	tlsFirst              bool
	inboxPrefix           string
	jsDomain, jsAPIPrefix string
	contextPath           string
}

// merge combines the options with the context (nil when none): the
// options win setting by setting, and any credential in the options
// replaces all of the context's.
func merge(o Options, c *natsContext) settings {
	s := settings{urls: o.URL, creds: o.Creds, nkey: o.NKey, ca: o.CA, cert: o.Cert, key: o.Key, inboxPrefix: o.InboxPrefix}
	if c == nil {
		return s
	}
	s.contextPath = c.path
	if s.urls == "" {
		s.urls = c.URL
	}
	if o.Creds == "" && o.NKey == "" && !urlsHaveUser(o.URL) {
		s.creds, s.nkey, s.user, s.password, s.token = c.Creds, c.NKey, c.User, c.Password, c.Token
	}
	s.ca = firstOf(o.CA, c.CA)
	if o.Cert == "" && o.Key == "" {
		s.cert, s.key = c.Cert, c.Key
	}
	s.tlsFirst, s.jsDomain, s.jsAPIPrefix = c.TLSFirst, c.JSDomain, c.JSAPIPrefix
	s.inboxPrefix = firstOf(o.InboxPrefix, c.InboxPrefix)
	return s
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// check refuses settings that cannot work, naming the setting.
func (s settings) check() error {
	switch {
	case s.creds != "" && s.nkey != "":
		return fmt.Errorf("%w: creds (%s) and nkey (%s): give one of them", ErrInvalidOptions, s.creds, s.nkey)
	case (s.cert == "") != (s.key == ""):
		return fmt.Errorf("%w: tls-cert and tls-key: a client certificate needs both (cert %q, key %q)", ErrInvalidOptions, s.cert, s.key)
	}
	if err := checkInboxPrefix(s.inboxPrefix); err != nil {
		return err
	}
	for _, f := range []struct{ name, path string }{
		{"creds", s.creds}, {"nkey", s.nkey}, {"tls-ca", s.ca}, {"tls-cert", s.cert}, {"tls-key", s.key},
	} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrInvalidOptions, f.name, err)
		}
	}
	return nil
}

// natsOptions are the client options that offer the credentials and TLS
// material of s.
func (s settings) natsOptions() ([]nats.Option, error) {
	var opts []nats.Option
	switch {
	case s.creds != "":
		opts = append(opts, nats.UserCredentials(s.creds))
	case s.nkey != "":
		opt, err := nats.NkeyOptionFromSeed(s.nkey)
		if err != nil {
			return nil, fmt.Errorf("%w: nkey: %s: %w", ErrInvalidOptions, s.nkey, err)
		}
		opts = append(opts, opt)
	case s.user != "":
		opts = append(opts, nats.UserInfo(s.user, s.password))
	case s.token != "":
		opts = append(opts, nats.Token(s.token))
	}
	if s.ca != "" {
		opts = append(opts, nats.RootCAs(s.ca))
	}
	if s.cert != "" {
		opts = append(opts, nats.ClientCert(s.cert, s.key))
	}
	if s.tlsFirst {
		opts = append(opts, nats.TLSHandshakeFirst())
	}
	if s.inboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(s.inboxPrefix))
	}
	return opts, nil
}

// offered describes, without secrets, what s offers the server.
func (s settings) offered() string {
	var parts []string
	switch {
	case s.creds != "":
		parts = append(parts, "creds file "+s.creds+credsSubject(s.creds))
	case s.nkey != "":
		parts = append(parts, "NKEY "+nkeyPublic(s.nkey)+" from seed file "+s.nkey)
	case s.user != "":
		parts = append(parts, fmt.Sprintf("user %q with a password from context %s", s.user, s.contextPath))
	case s.token != "":
		parts = append(parts, "a token from context "+s.contextPath)
	default:
		if d := urlCredentials(s.urls); d != "" {
			parts = append(parts, d)
		} else {
			parts = append(parts, "no credentials")
		}
	}
	if s.ca != "" {
		parts = append(parts, "CA file "+s.ca)
	}
	if s.cert != "" {
		parts = append(parts, "client certificate "+s.cert+certSubject(s.cert))
	} else if s.ca != "" || strings.Contains(s.urls, "tls://") {
		parts = append(parts, "no client certificate")
	}
	return strings.Join(parts, ", ")
}

// credsSubject names the user of a creds file, " (user NAME, UABC…)",
// or "" when the file does not parse.
func credsSubject(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	token, err := jwt.ParseDecoratedJWT(data)
	if err != nil {
		return ""
	}
	uc, err := jwt.DecodeUserClaims(token)
	if err != nil {
		return ""
	}
	if uc.Name != "" && uc.Name != uc.Subject {
		return fmt.Sprintf(" (user %q, %s)", uc.Name, uc.Subject)
	}
	return " (user " + uc.Subject + ")"
}

// nkeyPublic is the public key of an NKEY seed file, or "(unreadable)".
func nkeyPublic(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(unreadable)"
	}
	kp, err := nkeys.ParseDecoratedNKey(data)
	if err != nil {
		return "(not a seed)"
	}
	defer kp.Wipe()
	pub, err := kp.PublicKey()
	if err != nil {
		return "(not a seed)"
	}
	return pub
}

// certSubject is " (CN=…)" for a PEM certificate file, or "".
func certSubject(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return ""
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return ""
	}
	return " (" + cert.Subject.String() + ")"
}

// urlCredentials describes the user or token the URLs carry, or "".
func urlCredentials(urls string) string {
	for _, raw := range strings.Split(urls, ",") {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil || u.User == nil {
			continue
		}
		if _, ok := u.User.Password(); ok {
			return fmt.Sprintf("user %q with a password from the URL", u.User.Username())
		}
		return "a token from the URL"
	}
	return ""
}

func urlsHaveUser(urls string) bool { return urlCredentials(urls) != "" }

// redact returns the URLs without their users, passwords and tokens.
func redact(urls string) string {
	parts := strings.Split(urls, ",")
	for i, raw := range parts {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil {
			parts[i] = "(unparsable URL)"
			continue
		}
		u.User = nil // described apart, never printed
		parts[i] = u.String()
	}
	return strings.Join(parts, ",")
}

// ErrInvalidOptions is wrapped by every error about the connection
// settings themselves (a missing file, two kinds of credentials, half a
// client certificate, an unreadable context), found before connecting.
var ErrInvalidOptions = errors.New("connect: invalid options")

// checkInboxPrefix refuses an inbox prefix the client could not subscribe
// under: empty tokens, wildcards, white space.
func checkInboxPrefix(p string) error {
	if p == "" {
		return nil
	}
	for _, tok := range strings.Split(p, ".") {
		if tok == "" || tok == "*" || tok == ">" || strings.ContainsAny(tok, " \t\r\n*>") {
			return fmt.Errorf("%w: inbox-prefix %q: must be a subject of non-empty tokens without wildcards or white space, e.g. _INBOX_publisher", ErrInvalidOptions, p)
		}
	}
	return nil
}
