package monitor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/netlimit"
	"github.com/agentledger/ledger/internal/projection"
)

// Server serves /metrics, /healthz and /readyz, and polls the lag.
type Server struct {
	Metrics *Metrics
	Src     Source
	NC      *nats.Conn
	JS      jetstream.JetStream
	Log     *slog.Logger
	// Interval is how often the lag is polled (default 2s); the lag is
	// known while the last successful poll is at most 3 intervals old.
	Interval time.Duration

	lastPoll atomic.Int64 // unix nanos of the last successful poll
}

// Listen opens addr; Serve then serves on it. Listening first makes a
// taken address an error at start, not in a goroutine.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	return ln, nil
}

// Serve serves on ln and polls the lag until ctx ends, then shuts the
// HTTP server down (within 5 s) and returns.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if s.Interval <= 0 {
		s.Interval = 2 * time.Second
	}
	pollDone := make(chan struct{})
	go func() {
		defer close(pollDone)
		s.poll(ctx)
	}()
	err := Serve(ctx, ln, s.Metrics.Registry, s.readyz, s.Log)
	<-pollDone
	return err
}

// Limits of the metrics server: a scraper and a prober or two, small
// answers.
const (
	maxScrapeConns     = 64
	scrapeReadTimeout  = 10 * time.Second
	scrapeWriteTimeout = 30 * time.Second
	scrapeIdleTimeout  = time.Minute
)

// Serve serves /metrics (reg), /healthz (200 while the process runs) and
// /readyz (ready) on ln until ctx ends, then shuts the server down (within
// 5 s) and returns. It has read, write and idle timeouts and a cap of
// connections, whose refusals go to log at WARN.
func Serve(ctx context.Context, ln net.Listener, reg *prometheus.Registry, ready http.HandlerFunc, log *slog.Logger) error {
	capped, err := netlimit.NewListener(ln, maxScrapeConns, netlimit.NewRefusals(log, 0, nil))
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", ready)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: scrapeReadTimeout,
		WriteTimeout: scrapeWriteTimeout, IdleTimeout: scrapeIdleTimeout}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(capped) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		err = srv.Shutdown(sctx)
		cancel()
		<-serveErr
	case err = <-serveErr:
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// poll reads the stream's last sequence and the ledger's checkpoint every
// interval.
func (s *Server) poll(ctx context.Context) {
	t := time.NewTicker(s.Interval)
	defer t.Stop()
	for {
		s.pollOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Server) pollOnce(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.Interval)
	defer cancel()
	cp, err := projection.ReadCheckpoint(ctx, s.JS)
	if err != nil {
		return // the buckets may not exist yet; the lag stays unknown
	}
	stream, err := s.JS.Stream(ctx, names.AttemptsStream)
	if err != nil {
		return
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return
	}
	s.Metrics.setPosition(info.State.FirstSeq, info.State.LastSeq, max(cp, s.Src.Applied()))
	s.lastPoll.Store(time.Now().UnixNano())
}

// readyz answers 200 when the process is connected to NATS and either
// holds the lease or stands by with the lag known; 503 otherwise, saying
// why.
func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	lagKnown := time.Since(time.Unix(0, s.lastPoll.Load())) <= 3*s.Interval
	switch {
	case !s.NC.IsConnected():
		http.Error(w, "not ready: not connected to NATS ("+s.NC.Status().String()+")", http.StatusServiceUnavailable)
	case s.Src.Leading():
		fmt.Fprintln(w, "ready: holding the lease")
	case lagKnown:
		fmt.Fprintln(w, "ready: standing by, lag known")
	default:
		http.Error(w, "not ready: standing by and the lag is not known yet", http.StatusServiceUnavailable)
	}
}
