package connect

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPermissionErrorNamesTheSubject(t *testing.T) {
	for _, c := range []struct{ server, op, subject string }{
		{`Permissions Violation for Publish to "$JS.API.STREAM.INFO.LEDGER_ATTEMPTS"`, "publish to", "$JS.API.STREAM.INFO.LEDGER_ATTEMPTS"},
		{`Permissions Violation for Subscription to "_INBOX.abc.*"`, "subscribe to", "_INBOX.abc.*"},
		{`Permissions Violation for Publish to "ledger.attempts.s.r" using queue "q"`, "publish to", "ledger.attempts.s.r"},
	} {
		pe := parsePermission(fmt.Errorf("%w: %s", nats.ErrPermissionViolation, c.server))
		assert.Equal(t, c.op, pe.Op)
		assert.Equal(t, c.subject, pe.Subject)
		assert.ErrorIs(t, pe, ErrPermission)
		assert.ErrorIs(t, pe, nats.ErrPermissionViolation)
		assert.Contains(t, pe.Error(), `may not `+c.op+` "`+c.subject+`"`)
	}
}

func TestGuardEndsAtTheFirstViolation(t *testing.T) {
	c := &Conn{denied: make(chan struct{})}
	ctx, cancel := c.Guard(t.Context())
	defer cancel()
	require.NoError(t, c.Denied())
	timeout := errors.New("context deadline exceeded")
	assert.Equal(t, timeout, c.Explain(timeout))

	c.deny(fmt.Errorf("%w: Permissions Violation for Publish to \"a.b\"", nats.ErrPermissionViolation))
	c.deny(fmt.Errorf("%w: Permissions Violation for Publish to \"c.d\"", nats.ErrPermissionViolation))
	<-ctx.Done()
	var pe *PermissionError
	require.ErrorAs(t, context.Cause(ctx), &pe)
	assert.Equal(t, "a.b", pe.Subject, "the first is kept")
	require.ErrorAs(t, c.Explain(timeout), &pe)
	assert.Contains(t, c.Explain(timeout).Error(), "then: context deadline exceeded")
	assert.Equal(t, c.Denied(), c.Explain(nil))
}

func TestInboxPrefixIsChecked(t *testing.T) {
	for p, ok := range map[string]bool{"": true, "_INBOX_publisher": true, "ledger.inbox.gw": true,
		"_INBOX.>": false, "a..b": false, "a.*": false, "has space": false, ".a": false} {
		err := checkInboxPrefix(p)
		if ok {
			assert.NoError(t, err, p)
		} else {
			assert.ErrorIs(t, err, ErrInvalidOptions, p)
			assert.ErrorContains(t, err, "inbox-prefix", p)
		}
	}
}
