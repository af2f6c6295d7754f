package providertest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/retry"
)

func post(t *testing.T, ctx context.Context, url string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"q":1}`))
	require.NoError(t, err)
	return http.DefaultClient.Do(req)
}

func TestServerReply(t *testing.T) {
	s := Start(t, Reply{Status: 503, Header: map[string]string{"Retry-After": "2"}, Body: `{"x":1}`})
	res, err := post(t, context.Background(), s.URL+"/v1/x")
	require.NoError(t, err)
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	assert.Equal(t, 503, res.StatusCode)
	assert.Equal(t, "2", res.Header.Get("Retry-After"))
	assert.Equal(t, `{"x":1}`, string(body))
	assert.EqualValues(t, 1, s.Requests())
}

func TestServerFaults(t *testing.T) {
	tests := []struct {
		name  string
		reply Reply
		// check gets the error of the round trip or of reading the body.
		check func(t *testing.T, err error)
	}{
		{
			name:  "truncate",
			reply: Reply{Status: 200, Header: map[string]string{"Content-Type": "application/json"}, Body: `{"id":`, Fault: FaultTruncate},
			check: func(t *testing.T, err error) { assert.ErrorIs(t, err, io.ErrUnexpectedEOF) },
		},
		{
			name:  "reset",
			reply: Reply{Fault: FaultReset},
			check: func(t *testing.T, err error) {
				c, ok := retry.ClassifyTransport(context.Background(), err)
				require.True(t, ok, "%v", err)
				assert.Equal(t, events.KindConnection, c.Kind)
			},
		},
		{
			name:  "hang",
			reply: Reply{Fault: FaultHang},
			check: func(t *testing.T, err error) { assert.ErrorIs(t, err, context.DeadlineExceeded) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Start(t, tt.reply)
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			res, err := post(t, ctx, s.URL)
			if err == nil {
				_, err = io.ReadAll(res.Body)
				_ = res.Body.Close()
			}
			require.Error(t, err)
			tt.check(t, err)
			assert.EqualValues(t, 1, s.Requests())
		})
	}
}

// TestServerHangReleasedAtCleanup shows that a handler that hangs with the
// client still waiting is released when the test ends: the subtest's cleanup
// returns and the request fails instead of blocking forever.
func TestServerHangReleasedAtCleanup(t *testing.T) {
	errc := make(chan error, 1)
	t.Run("inner", func(t *testing.T) {
		s := Start(t, Reply{Status: 200, Body: "partial", Fault: FaultHang})
		res, err := post(t, context.Background(), s.URL)
		require.NoError(t, err)
		go func() {
			_, err := io.ReadAll(res.Body)
			_ = res.Body.Close()
			errc <- err
		}()
	})
	select {
	case err := <-errc:
		// The server closed the connection; the chunked body ends early.
		assert.True(t, err == nil || errors.Is(err, io.ErrUnexpectedEOF), "%v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the hanging handler was not released at cleanup")
	}
}

func TestClassifyFallsThroughToTransport(t *testing.T) {
	never := retry.ClassifierFunc(func(error, time.Time) (retry.Classification, bool) { return retry.Classification{}, false })
	c, ok := Classify(context.Background(), never, context.DeadlineExceeded, time.Now())
	require.True(t, ok)
	assert.Equal(t, events.KindTimeout, c.Kind)
	assert.True(t, c.Retryable)

	always := retry.ClassifierFunc(func(error, time.Time) (retry.Classification, bool) {
		return retry.Classification{Kind: events.KindQuota}, true
	})
	c, ok = Classify(context.Background(), always, context.DeadlineExceeded, time.Now())
	require.True(t, ok)
	assert.Equal(t, events.KindQuota, c.Kind)
}
