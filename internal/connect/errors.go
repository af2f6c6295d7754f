package connect

import (
	"crypto/x509"
	"errors"
	"net"
	"os"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/agentledger/ledger/api"
)

// ErrRefused is wrapped by every *Error: the server could not be reached
// or refused the connection (api.ErrRefused, ledger.ErrRefused).
var ErrRefused = api.ErrRefused

// Error is a connection that failed: which server, what the client
// offered (never a secret), what went wrong in words, and the client
// library's error (api.ConnectError, ledger.ConnectError).
type Error = api.ConnectError

// refusal says in words what err means for a connection attempt.
func refusal(err error, s settings) string {
	msg := strings.ToLower(err.Error())
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalid x509.CertificateInvalidError
	var netErr net.Error
	switch {
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired),
		errors.Is(err, nats.ErrAuthRevoked), errors.Is(err, nats.ErrAccountAuthExpired),
		strings.Contains(msg, "authorization violation"), strings.Contains(msg, "authentication"):
		if s.offered() == "no credentials" || strings.HasPrefix(s.offered(), "no credentials,") {
			return "the server requires credentials and none were offered"
		}
		return "the server refused the credentials"
	case errors.As(err, &unknownCA):
		return "the server's TLS certificate is not signed by a trusted CA (give its CA with --tls-ca)"
	case errors.As(err, &hostErr):
		return "the server's TLS certificate is not valid for this host name"
	case errors.As(err, &invalid):
		return "the server's TLS certificate is invalid"
	case strings.Contains(msg, "closed by remote after tls handshake") && s.cert != "":
		// TLS 1.3: the client's handshake ends before the server has
		// checked its certificate; the refusal is the closed connection.
		return "the server refused the TLS client certificate (it closed the connection after the handshake)"
	case strings.Contains(msg, "certificate required"), strings.Contains(msg, "closed by remote after tls handshake"):
		return "the server requires a TLS client certificate and none was offered"
	case strings.Contains(msg, "bad certificate"), strings.Contains(msg, "unknown certificate authority"),
		strings.Contains(msg, "certificate verify") && s.cert != "":
		return "the server refused the TLS client certificate"
	case errors.Is(err, nats.ErrSecureConnRequired):
		return "the server requires TLS"
	case errors.Is(err, nats.ErrSecureConnWanted):
		return "TLS was asked for but the server does not offer it"
	case errors.Is(err, nats.ErrTimeout), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &netErr) && netErr.Timeout():
		return "the server did not answer in time"
	case errors.Is(err, nats.ErrNoServers), strings.Contains(msg, "connection refused"):
		return "no server accepted the connection"
	case strings.Contains(msg, "tls"), strings.Contains(msg, "x509"):
		return "the TLS handshake failed"
	}
	return "the connection failed"
}
