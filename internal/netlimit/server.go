package netlimit

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// Server is how a network-facing HTTP server runs on a Listener: the
// header and idle timeouts here, no total read or write timeout (a
// handler's Timeouts bound a body and each write, so that streams last),
// and a graceful shutdown.
type Server struct {
	// Name prefixes its log records, e.g. "gateway".
	Name string
	// HeaderTimeout bounds the reading of a request's headers;
	// IdleTimeout, a keep-alive connection's wait for its next request.
	// Both must be positive.
	HeaderTimeout, IdleTimeout time.Duration
	// ShutdownTimeout is how long the requests in flight may finish once
	// Serve's context ends, before they are cut. It must be positive.
	ShutdownTimeout time.Duration
	// Logger receives the shutdown's records and the HTTP server's own
	// errors (at DEBUG: a client's broken TLS or headers is not news).
	Logger *slog.Logger
}

// HTTPServer is the http.Server of h on ln.
func (s Server) HTTPServer(h http.Handler, ln *Listener) *http.Server {
	return &http.Server{
		Handler:           h,
		ConnState:         ln.ConnState, // so that at the cap an idle connection makes room
		ReadHeaderTimeout: s.HeaderTimeout,
		IdleTimeout:       s.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(s.Logger.Handler(), slog.LevelDebug),
	}
}

// Serve serves h on ln until ctx ends, then shuts the server down: no new
// requests, those in flight given ShutdownTimeout to finish, then cut
// (logged at WARN). It returns when every connection is closed; the error
// is the server's, nil after a shutdown. The caller owns ln; Serve closes
// it.
func (s Server) Serve(ctx context.Context, ln *Listener, h http.Handler) error {
	srv := s.HTTPServer(h, ln)
	errc := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() { errc <- srv.Serve(ln) })
	defer wg.Wait()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.Logger.Info(s.Name+": stopping; calls in flight may finish", "timeout", s.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		s.Logger.Warn(s.Name+": calls still in flight were cut", "error", err)
		_ = srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// DescriptorCap is want lowered, when the process's file descriptor limit
// cannot hold it, to that limit less reserve (at least 1): a server out of
// descriptors cannot reach its own dependencies either. lowered reports
// that it was, and limit is the descriptor limit then, for the caller's
// warning.
func DescriptorCap(want, reserve int) (c int, limit uint64, lowered bool) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > uint64(want)+uint64(reserve) {
		return want, rl.Cur, false
	}
	return max(1, int(rl.Cur)-reserve), rl.Cur, true
}
