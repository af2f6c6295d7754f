package connect

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/embedded"
)

// startServer runs a server with opts (host, port and logging forced) for
// the test and returns its client URL.
func startServer(t *testing.T, opts *server.Options) string {
	t.Helper()
	opts.Host, opts.Port, opts.NoLog, opts.NoSigs = "127.0.0.1", server.RANDOM_PORT, true, true
	s, err := embedded.Start(opts)
	require.NoError(t, err)
	t.Cleanup(s.Shutdown)
	return s.URL()
}

// seedFile writes a new user NKEY seed and returns its file and public key.
func seedFile(t *testing.T) (path, pub string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	require.NoError(t, err)
	seed, err := kp.Seed()
	require.NoError(t, err)
	pub, err = kp.PublicKey()
	require.NoError(t, err)
	path = filepath.Join(t.TempDir(), "user.nk")
	require.NoError(t, os.WriteFile(path, seed, 0o600))
	return path, pub
}

// operator is a decentralized-auth setup: an operator, one account and a
// server that trusts them; creds issues a creds file for a new user of
// the account, signed by signer (the account's key, or another one).
type operator struct {
	url     string
	account nkeys.KeyPair
}

func startOperatorServer(t *testing.T) *operator {
	t.Helper()
	okp, err := nkeys.CreateOperator()
	require.NoError(t, err)
	opub, err := okp.PublicKey()
	require.NoError(t, err)
	oc := jwt.NewOperatorClaims(opub)
	oc.Name = "ledger-test-operator"
	ojwt, err := oc.Encode(okp)
	require.NoError(t, err)
	opClaims, err := jwt.DecodeOperatorClaims(ojwt)
	require.NoError(t, err)

	akp, err := nkeys.CreateAccount()
	require.NoError(t, err)
	apub, err := akp.PublicKey()
	require.NoError(t, err)
	ac := jwt.NewAccountClaims(apub)
	ac.Name = "LEDGER"
	ajwt, err := ac.Encode(okp)
	require.NoError(t, err)

	resolver := &server.MemAccResolver{}
	require.NoError(t, resolver.Store(apub, ajwt))
	url := startServer(t, &server.Options{TrustedOperators: []*jwt.OperatorClaims{opClaims}, AccountResolver: resolver})
	return &operator{url: url, account: akp}
}

func (o *operator) creds(t *testing.T, name string, signer nkeys.KeyPair) string {
	t.Helper()
	ukp, err := nkeys.CreateUser()
	require.NoError(t, err)
	upub, err := ukp.PublicKey()
	require.NoError(t, err)
	uc := jwt.NewUserClaims(upub)
	uc.Name = name
	apub, err := o.account.PublicKey()
	require.NoError(t, err)
	uc.IssuerAccount = apub
	ujwt, err := uc.Encode(signer)
	require.NoError(t, err)
	seed, err := ukp.Seed()
	require.NoError(t, err)
	data, err := jwt.FormatUserConfig(ujwt, seed)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), name+".creds")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	return path
}

// open connects with o and closes the connection at cleanup.
func open(t *testing.T, o Options) (*Conn, error) {
	t.Helper()
	o.Timeout = 3 * time.Second
	c, err := Open(o)
	if err == nil {
		t.Cleanup(c.Close)
	}
	return c, err
}

// refusedWith checks that err is an *Error naming the server, with the
// given words in what was offered and what was refused.
func refusedWith(t *testing.T, err error, server string, offered, refused []string) {
	t.Helper()
	var ce *Error
	require.True(t, errors.As(err, &ce), "want *connect.Error, got %T: %v", err, err)
	assert.ErrorIs(t, err, ErrRefused)
	msg := err.Error()
	assert.Contains(t, msg, server, "the error names the server")
	for _, w := range offered {
		assert.Contains(t, ce.Offered, w)
	}
	for _, w := range refused {
		assert.Contains(t, ce.Refused, w)
	}
	assert.Contains(t, msg, ce.Offered)
	assert.Contains(t, msg, ce.Refused)
}

func TestNKEY(t *testing.T) {
	good, pub := seedFile(t)
	wrong, wrongPub := seedFile(t)
	url := startServer(t, &server.Options{Nkeys: []*server.NkeyUser{{Nkey: pub}}})

	_, err := open(t, Options{URL: url, NKey: good})
	require.NoError(t, err)

	_, err = open(t, Options{URL: url, NKey: wrong})
	refusedWith(t, err, url, []string{"NKEY " + wrongPub, wrong}, []string{"refused the credentials"})

	_, err = open(t, Options{URL: url})
	refusedWith(t, err, url, []string{"no credentials"}, []string{"requires credentials and none were offered"})

	_, err = open(t, Options{URL: url, NKey: filepath.Join(t.TempDir(), "missing.nk")})
	require.ErrorIs(t, err, ErrInvalidOptions)
	assert.Contains(t, err.Error(), "nkey")
}

func TestUserPassword(t *testing.T) {
	url := startServer(t, &server.Options{Users: []*server.User{{Username: "agent", Password: "s3cret"}}})
	withUser := func(user, pass string) string {
		return strings.Replace(url, "nats://", "nats://"+user+":"+pass+"@", 1)
	}
	_, err := open(t, Options{URL: withUser("agent", "s3cret")})
	require.NoError(t, err)

	_, err = open(t, Options{URL: withUser("agent", "wrong")})
	refusedWith(t, err, url, []string{`user "agent" with a password from the URL`}, []string{"refused the credentials"})
	assert.NotContains(t, err.Error(), "wrong", "the password is never printed")

	_, err = open(t, Options{URL: url})
	refusedWith(t, err, url, []string{"no credentials"}, []string{"none were offered"})
}

func TestToken(t *testing.T) {
	url := startServer(t, &server.Options{Authorization: "t0ken-abc"})
	withToken := func(tok string) string { return strings.Replace(url, "nats://", "nats://"+tok+"@", 1) }
	_, err := open(t, Options{URL: withToken("t0ken-abc")})
	require.NoError(t, err)

	_, err = open(t, Options{URL: withToken("not-it")})
	refusedWith(t, err, url, []string{"a token from the URL"}, []string{"refused the credentials"})
	assert.NotContains(t, err.Error(), "not-it", "the token is never printed")
}

func TestCredsFile(t *testing.T) {
	op := startOperatorServer(t)
	good := op.creds(t, "agent-1", op.account)
	_, err := open(t, Options{URL: op.url, Creds: good})
	require.NoError(t, err)

	// A user signed by an account the operator never issued.
	stranger, err := nkeys.CreateAccount()
	require.NoError(t, err)
	bad := op.creds(t, "intruder", stranger)
	_, err = open(t, Options{URL: op.url, Creds: bad})
	refusedWith(t, err, op.url, []string{"creds file " + bad, `user "intruder"`}, []string{"refused the credentials"})

	_, err = open(t, Options{URL: op.url})
	refusedWith(t, err, op.url, []string{"no credentials"}, []string{"none were offered"})

	_, err = open(t, Options{URL: op.url, Creds: good, NKey: good})
	require.ErrorIs(t, err, ErrInvalidOptions)
}

func TestTLSWithPrivateCA(t *testing.T) {
	p := newPKI(t)
	url := startServer(t, &server.Options{TLSConfig: p.serverTLS(t, false), TLS: true})

	_, err := open(t, Options{URL: url, CA: p.caFile})
	require.NoError(t, err)

	_, err = open(t, Options{URL: url})
	refusedWith(t, err, url, []string{"no credentials"}, []string{"not signed by a trusted CA"})

	other := newPKI(t)
	_, err = open(t, Options{URL: url, CA: other.caFile})
	refusedWith(t, err, url, []string{"CA file " + other.caFile}, []string{"not signed by a trusted CA"})
}

func TestMutualTLS(t *testing.T) {
	p := newPKI(t)
	url := startServer(t, &server.Options{TLSConfig: p.serverTLS(t, true), TLS: true, TLSVerify: true})

	_, err := open(t, Options{URL: url, CA: p.caFile, Cert: p.clientCert, Key: p.clientKey})
	require.NoError(t, err)

	_, err = open(t, Options{URL: url, CA: p.caFile})
	refusedWith(t, err, url, []string{"CA file", "no client certificate"}, []string{"client certificate"})

	// A client certificate from a CA the server does not trust.
	other := newPKI(t)
	_, err = open(t, Options{URL: url, CA: p.caFile, Cert: other.clientCert, Key: other.clientKey})
	refusedWith(t, err, url, []string{"client certificate " + other.clientCert, "CN=agent-7"}, []string{"client certificate"})

	_, err = open(t, Options{URL: url, CA: p.caFile, Cert: p.clientCert})
	require.ErrorIs(t, err, ErrInvalidOptions)
	assert.Contains(t, err.Error(), "tls-key")
}

// A server that accepts the TCP connection and never says a word does not
// make Open hang.
func TestSilentServerDoesNotHang(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	url := "nats://" + ln.Addr().String()
	start := time.Now()
	_, err = Open(Options{URL: url, Timeout: 300 * time.Millisecond})
	require.Less(t, time.Since(start), 10*time.Second)
	refusedWith(t, err, url, []string{"no credentials"}, []string{"did not answer in time"})
}

func TestNoServerNamed(t *testing.T) {
	_, err := Open(Options{})
	require.ErrorIs(t, err, ErrNoServer)
}
