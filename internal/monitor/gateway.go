package monitor

import (
	"fmt"
	"net/http"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/agentledger/ledger/internal/emit"
	"github.com/agentledger/ledger/internal/gateway"
	"github.com/agentledger/ledger/internal/netlimit"
)

// GatewaySource is what the gateway's metrics read when scraped.
type GatewaySource struct {
	Gateway *gateway.Gateway
	// Listener caps the gateway's connections; nil: no connection
	// metrics.
	Listener *netlimit.Listener
	// Events are the publisher's counters.
	Events func() emit.Stats
}

// NewGatewayRegistry returns a registry of the gateway's metrics, read
// from src when scraped:
//
//	ledger_gateway_requests_total{route}        counter: requests served, route accounted or passthrough
//	ledger_gateway_refusals_total{reason}       counter: requests and connections the limits refused (netlimit's reasons)
//	ledger_gateway_body_bytes_in_flight         gauge: bytes of request bodies held, of
//	ledger_gateway_body_bytes_budget            gauge: the byte budget
//	ledger_gateway_connections_open             gauge: client connections open, of
//	ledger_gateway_connections_max              gauge: the connection cap
//	ledger_gateway_connections_evicted_total    counter: idle or silent connections closed to make room at the cap
//	ledger_gateway_events_queued                gauge: attempt events published and not yet acknowledged
//	ledger_gateway_events_acked_total           counter: attempt events the stream acknowledged
//	ledger_gateway_events_undelivered           gauge: events never acknowledged (set when the publisher closes)
//	ledger_gateway_outbox_events                gauge: events kept in the outbox (--outbox), not yet acknowledged
//	ledger_gateway_outbox_bytes                 gauge: their bytes on disk
//	ledger_gateway_events_recovered_total       counter: events read back from the outbox an earlier run left
//
// plus the Go runtime's and the process's collectors.
func NewGatewayRegistry(src GatewaySource) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	gw := src.Gateway
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	requests := func(route string, f func(gateway.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ledger_gateway_requests_total",
			Help: "Requests the gateway served: model calls it accounted, or others it proxied through.", ConstLabels: prometheus.Labels{"route": route}},
			func() float64 { return float64(f(gw.Stats())) })
	}
	reg.MustRegister(
		requests("accounted", func(s gateway.Stats) uint64 { return s.Accounted }),
		requests("passthrough", func(s gateway.Stats) uint64 { return s.Requests - s.Accounted }),
		refusalCollector{r: gw.Refusals(), desc: prometheus.NewDesc("ledger_gateway_refusals_total",
			"Requests and connections the gateway's limits refused (or held, at the connection cap), by reason.", []string{"reason"}, nil)},
		gauge("ledger_gateway_body_bytes_in_flight", "Bytes of request bodies the gateway holds now.",
			func() float64 { return float64(gw.Stats().BodyBytesInFlight) }),
		gauge("ledger_gateway_body_bytes_budget", "The byte budget of request bodies in flight; past it calls get 503.",
			func() float64 { return float64(gw.Stats().MaxBodyBytesInFlight) }),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	if ln := src.Listener; ln != nil {
		reg.MustRegister(
			gauge("ledger_gateway_connections_open", "Client connections open.", func() float64 { return float64(ln.Open()) }),
			gauge("ledger_gateway_connections_max", "The cap on client connections; at it, new ones wait.", func() float64 { return float64(ln.Max()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ledger_gateway_connections_evicted_total",
				Help: "Idle or silent connections closed to make room for a new one at the cap."}, func() float64 { return float64(ln.Evicted()) }),
		)
	}
	if ev := src.Events; ev != nil {
		reg.MustRegister(
			gauge("ledger_gateway_events_queued", "Attempt events published and not yet acknowledged by the stream.", func() float64 {
				s := ev()
				return float64(s.Enqueued - min(s.Acked, s.Enqueued))
			}),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ledger_gateway_events_acked_total",
				Help: "Attempt events the stream acknowledged."}, func() float64 { return float64(ev().Acked) }),
			gauge("ledger_gateway_events_undelivered", "Attempt events never acknowledged; set when the publisher closes.",
				func() float64 { return float64(ev().Undelivered) }),
			gauge("ledger_gateway_outbox_events", "Attempt events kept in the outbox on disk (--outbox), not yet acknowledged.",
				func() float64 { return float64(ev().OutboxEvents) }),
			gauge("ledger_gateway_outbox_bytes", "Bytes of the attempt events kept in the outbox on disk.",
				func() float64 { return float64(ev().OutboxBytes) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ledger_gateway_events_recovered_total",
				Help: "Attempt events read back from the outbox an earlier run left, and published again."}, func() float64 { return float64(ev().Recovered) }),
		)
	}
	return reg
}

// refusalCollector reads the refusals by reason when scraped.
type refusalCollector struct {
	r    *netlimit.Refusals
	desc *prometheus.Desc
}

func (c refusalCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c refusalCollector) Collect(ch chan<- prometheus.Metric) {
	for reason, n := range c.r.Counts() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(n), reason)
	}
}

// GatewayReady answers /readyz for a gateway: 200 while connected to
// NATS (the events can be delivered and the attempt numbers kept), 503
// saying why otherwise.
func GatewayReady(nc *nats.Conn) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if !nc.IsConnected() {
			http.Error(w, "not ready: not connected to NATS ("+nc.Status().String()+")", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready: connected to NATS")
	}
}
