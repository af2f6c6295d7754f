package metrics_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger"
	"github.com/agentledger/ledger/ledgertest"
	"github.com/agentledger/ledger/metrics"
	"github.com/agentledger/ledger/provider/openai" // classifies its calls
)

func TestCollectors(t *testing.T) {
	l := ledgertest.Start(t, ledgertest.WithoutAggregator())
	pub := l.Publisher(t)
	mw, err := ledger.NewMiddleware(pub)
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.PublisherCollector(pub), metrics.MiddlewareCollector(mw))
	for i := range 3 {
		_, err := ledger.Do(t.Context(), mw, ledger.Call{SessionID: "s", Provider: openai.Name, Model: "m"},
			func(context.Context, ledger.Attempt) (int, ledger.Report, error) { return i, ledger.Report{}, nil })
		require.NoError(t, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	require.NoError(t, pub.Flush(ctx))
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP ledger_middleware_calls_total Logical calls run through the middleware.
# TYPE ledger_middleware_calls_total counter
ledger_middleware_calls_total 3
# HELP ledger_publisher_events_acked_total Attempt events the stream acknowledged, each once.
# TYPE ledger_publisher_events_acked_total counter
ledger_publisher_events_acked_total 3
# HELP ledger_publisher_events_enqueued_total Attempt events handed to the publisher.
# TYPE ledger_publisher_events_enqueued_total counter
ledger_publisher_events_enqueued_total 3
`), "ledger_middleware_calls_total", "ledger_publisher_events_acked_total", "ledger_publisher_events_enqueued_total"))
}
