package connect

import (
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"
)

// Bounds of the wait between reconnect attempts (see ReconnectDelay).
const (
	ReconnectBase = 100 * time.Millisecond
	ReconnectMax  = 5 * time.Second
)

// ReconnectDelay is the wait before reconnect round n (n >= 1: every
// server of the pool was tried n times): ReconnectBase doubled each round,
// capped at ReconnectMax, spread by ±20 % with r uniform in [0, 1) so
// that clients cut off together do not come back together. r out of
// range is clamped; the result is never negative.
func ReconnectDelay(n int, r float64) time.Duration {
	if n < 1 {
		n = 1
	}
	r = min(max(r, 0), 1)
	d := ReconnectMax
	if n <= 6 && ReconnectBase<<(n-1) < ReconnectMax {
		d = ReconnectBase << (n - 1)
	}
	return time.Duration(float64(d) * (0.8 + 0.4*r))
}

// reconnectOptions make the connection reconnect forever with
// ReconnectDelay between rounds and log every disconnect, failed attempt,
// reconnect and asynchronous error to log. closed is called once the
// connection is closed for good; denied with every permission violation
// the server reports.
func reconnectOptions(log *slog.Logger, closed func(), denied func(error)) []nats.Option {
	return []nats.Option{
		nats.MaxReconnects(-1),
		nats.CustomReconnectDelay(func(n int) time.Duration { return ReconnectDelay(n, rand.Float64()) }),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats: disconnected; reconnecting", "server", redact(nc.ConnectedUrl()), "err", err)
			}
		}),
		nats.ReconnectErrHandler(func(nc *nats.Conn, err error) {
			log.Warn("nats: reconnect attempt failed", "err", err, "reconnects", nc.Stats().Reconnects)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats: reconnected", "server", redact(nc.ConnectedUrl()), "reconnects", nc.Stats().Reconnects)
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			if errors.Is(err, nats.ErrPermissionViolation) {
				log.Error("nats: permission denied", "err", err)
				denied(err)
				return
			}
			log.Warn("nats: asynchronous error", "subject", subject, "err", err)
		}),
		nats.ClosedHandler(func(*nats.Conn) { closed() }),
	}
}
