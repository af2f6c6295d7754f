package ledger_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger"
	"github.com/agentledger/ledger/internal/embedded"
	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/testkit"
)

func osMkdirTemp() (string, error) { return os.MkdirTemp("", "ledger-example-") }

// A publisher does not create the stream unless asked; when asked, an
// existing stream with other settings is a warning naming the fix.
func TestPublisherStream(t *testing.T) {
	srv := natstest.Start(t)
	ctx := t.Context()
	conn, err := ledger.Connect(ctx, ledger.WithURL(srv.URL()))
	require.NoError(t, err)
	t.Cleanup(conn.Close)
	_, err = ledger.NewPublisher(ctx, conn.JetStream())
	require.ErrorIs(t, err, ledger.ErrNoStream)

	pub, err := ledger.NewPublisher(ctx, conn.JetStream(), ledger.WithCreateStream(ledger.StreamConfig{}))
	require.NoError(t, err)
	_, err = pub.Close(ctx)
	require.NoError(t, err)
	require.ErrorIs(t, pub.Flush(ctx), ledger.ErrPublisherClosed)

	var logs testkit.Logs
	pub, err = ledger.NewPublisher(ctx, conn.JetStream(), ledger.WithCreateStream(ledger.StreamConfig{DuplicateWindow: 5 * time.Minute}),
		ledger.WithPublisherLogger(logs.TextLogger(slog.LevelInfo)))
	require.NoError(t, err)
	_, _ = pub.Close(ctx)
	assert.Contains(t, logs.String(), "LEDGER_ATTEMPTS has duplicate window 2m0s, not the 5m0s asked for")
	assert.Contains(t, logs.String(), "nats stream edit LEDGER_ATTEMPTS --dupe-window 5m0s")
}

func TestOptionsAreValidated(t *testing.T) {
	ctx := context.Background()
	for name, err := range map[string]error{
		"WithURL":         func() error { _, err := ledger.Connect(ctx, ledger.WithURL("")); return err }(),
		"WithInboxPrefix": func() error { _, err := ledger.Connect(ctx, ledger.WithInboxPrefix("")); return err }(),
		"inbox-prefix": func() error {
			_, err := ledger.Connect(ctx, ledger.WithURL("nats://127.0.0.1:1"), ledger.WithInboxPrefix("_INBOX.>"))
			return err
		}(),
		"WithClientCert":     func() error { _, err := ledger.Connect(ctx, ledger.WithClientCert("c.pem", "")); return err }(),
		"WithConnectTimeout": func() error { _, err := ledger.Connect(ctx, ledger.WithConnectTimeout(0)); return err }(),
		"nkey":               func() error { _, err := ledger.Connect(ctx, ledger.WithNKeyFile("/nonexistent/seed.nk")); return err }(),
		"WithPolicy": func() error {
			_, err := ledger.NewMiddleware(&ledger.Publisher{}, ledger.WithPolicy(ledger.Policy{BaseDelay: -1}))
			return err
		}(),
		"WithLabels": func() error {
			_, err := ledger.NewMiddleware(&ledger.Publisher{}, ledger.WithLabels(ledger.Labels{"Team": "x"}))
			return err
		}(),
		"WithBreaker": func() error {
			_, err := ledger.NewMiddleware(&ledger.Publisher{}, ledger.WithBreaker(ledger.BreakerConfig{Cooldown: -1}))
			return err
		}(),
		"WithFleetLimits": func() error {
			_, err := ledger.NewMiddleware(&ledger.Publisher{}, ledger.WithFleetLimits(nil, ledger.FleetConfig{}))
			return err
		}(),
		"WithFleetLimits ": func() error { // Wait
			_, err := ledger.NewMiddleware(&ledger.Publisher{}, ledger.WithFleetLimits(&ledger.Conn{}, ledger.FleetConfig{Wait: -1}))
			return err
		}(),
		"WithFleetLimits  ": func() error { // Limits
			_, err := ledger.NewMiddleware(&ledger.Publisher{}, ledger.WithFleetLimits(&ledger.Conn{},
				ledger.FleetConfig{Limits: map[string]ledger.RateLimits{"gemini/x": {RequestsPerMinute: -1}}}))
			return err
		}(),
		"WithFleetLimits   ": func() error { // RetryBudget
			_, err := ledger.NewMiddleware(&ledger.Publisher{}, ledger.WithFleetLimits(&ledger.Conn{},
				ledger.FleetConfig{RetryBudget: ledger.RetryBudget{Percent: 20, Window: time.Millisecond}}))
			return err
		}(),
		"WithTracerProvider": func() error {
			_, err := ledger.NewMiddleware(&ledger.Publisher{}, ledger.WithTracerProvider(nil))
			return err
		}(),
		"WithMeterProvider": func() error {
			_, err := ledger.NewMiddleware(&ledger.Publisher{}, ledger.WithMeterProvider(nil))
			return err
		}(),
		"WithCreateStream": func() error {
			_, err := ledger.NewPublisher(ctx, nil, ledger.WithCreateStream(ledger.StreamConfig{Replicas: 9}))
			return err
		}(),
		"WithOutboxLimits": func() error {
			_, err := ledger.NewPublisher(ctx, nil, ledger.WithOutboxLimits(0, 1))
			return err
		}(),
		"WithOutbox": func() error {
			_, err := ledger.NewPublisher(ctx, nil, ledger.WithOutbox(""))
			return err
		}(),
	} {
		assert.ErrorIs(t, err, ledger.ErrInvalidOption, name)
		assert.ErrorContains(t, err, strings.TrimSpace(name))
	}
	_, err := ledger.NewMiddleware(&ledger.Publisher{}, ledger.WithPolicy(ledger.Policy{BaseDelay: time.Second, MaxDelay: time.Millisecond, HintCap: time.Second}))
	assert.EqualError(t, err, "ledger: invalid option: WithPolicy: MaxDelay is 1ms; it must be at least BaseDelay (1s)")
}

// A refused connection is a *ConnectError naming the server, what was
// offered and what was refused.
func TestConnectRefused(t *testing.T) {
	s, err := embeddedWithToken(t)
	require.NoError(t, err)
	_, err = ledger.Connect(t.Context(), ledger.WithURL(s))
	var ce *ledger.ConnectError
	require.ErrorAs(t, err, &ce)
	assert.ErrorIs(t, err, ledger.ErrRefused)
	assert.Equal(t, s, ce.Server)
	assert.Equal(t, "no credentials", ce.Offered)
	assert.Contains(t, ce.Refused, "requires credentials")
}

func embeddedWithToken(t *testing.T) (string, error) {
	return startWith(t, &server.Options{Authorization: "secret"})
}

func TestCallErrors(t *testing.T) {
	ctx := t.Context()
	pub := testPublisher(t)
	mw, err := ledger.NewMiddleware(pub, ledger.WithBreaker(ledger.BreakerConfig{FailureThreshold: 1, Cooldown: time.Hour}),
		ledger.WithPolicy(ledger.Policy{MaxRetries: 0, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond, HintCap: time.Second}))
	require.NoError(t, err)
	fail := func(context.Context, ledger.Attempt) (int, ledger.Report, error) {
		return 0, ledger.Report{}, context.DeadlineExceeded
	}

	_, err = ledger.Do(ctx, mw, ledger.Call{SessionID: "bad.id", Provider: "openai", Model: "m"}, fail)
	require.ErrorIs(t, err, ledger.ErrInvalidCall)
	assert.ErrorContains(t, err, "session_id")

	call := ledger.Call{SessionID: "s", Provider: "openai", Model: "m"}
	_, err = ledger.Do(ctx, mw, call, fail) // a timeout: retryable, opens the breaker
	var ce *ledger.CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, ledger.StopExhausted, ce.Reason)
	assert.True(t, errors.Is(err, context.DeadlineExceeded))
	_, err = ledger.Do(ctx, mw, call, fail)
	require.ErrorIs(t, err, ledger.ErrCircuitOpen)
}

// testPublisher is a publisher to an embedded server of the test's, with
// the stream; the test's cleanup closes both.
func testPublisher(t *testing.T) *ledger.Publisher {
	t.Helper()
	srv := natstest.Start(t)
	ctx := t.Context()
	conn, err := ledger.Connect(ctx, ledger.WithURL(srv.URL()))
	require.NoError(t, err)
	t.Cleanup(conn.Close)
	pub, err := ledger.NewPublisher(ctx, conn.JetStream(), ledger.WithCreateStream(ledger.StreamConfig{}))
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = pub.Close(context.Background()) })
	return pub
}

func startWith(t *testing.T, opts *server.Options) (string, error) {
	t.Helper()
	opts.Host, opts.Port, opts.NoLog, opts.NoSigs = "127.0.0.1", server.RANDOM_PORT, true, true
	s, err := embedded.Start(opts)
	if err != nil {
		return "", err
	}
	t.Cleanup(s.Shutdown)
	return s.URL(), nil
}
