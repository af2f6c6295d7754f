package providertest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync/atomic"
	"testing"
)

// Fault is how the server misbehaves after, or instead of, writing a reply.
type Fault int

const (
	// FaultNone writes the reply and returns.
	FaultNone Fault = iota
	// FaultHang writes and flushes the reply's status, headers and body when
	// Status is set, then blocks until the client goes away or the test
	// ends. With Status 0 it writes nothing, so the client waits for the
	// response headers.
	FaultHang
	// FaultTruncate writes the status line and headers with a Content-Length
	// longer than Body, then Body, then closes the connection: the response
	// breaks off mid-body.
	FaultTruncate
	// FaultReset reads the request and resets the connection (TCP RST)
	// without writing a byte of the response.
	FaultReset
)

// Reply is what the server answers to every request.
type Reply struct {
	Status int // 0 means 200, except for FaultHang (see there)
	Header map[string]string
	Body   string
	Fault  Fault
}

// truncatedExtra is how many bytes FaultTruncate's Content-Length promises
// beyond the body it writes.
const truncatedExtra = 64

// Server is an httptest server answering every request with one Reply. It
// counts the requests it saw. It is safe for concurrent use; it stops, and
// releases hanging handlers, when the test that started it ends.
type Server struct {
	// URL is the server's base URL, http://127.0.0.1:port with no path.
	URL string

	srv      *httptest.Server
	reply    Reply
	requests atomic.Int64
	release  chan struct{}
	t        testing.TB
}

// Start starts a server answering reply to every request and registers its
// shutdown with t.Cleanup.
func Start(t testing.TB, reply Reply) *Server {
	t.Helper()
	s := &Server{reply: reply, release: make(chan struct{}), t: t}
	s.srv = httptest.NewServer(http.HandlerFunc(s.handle))
	s.URL = s.srv.URL
	t.Cleanup(func() {
		close(s.release) // first, so that Close does not wait on hanging handlers
		s.srv.Close()
	})
	return s
}

// Requests reports how many requests the server has received.
func (s *Server) Requests() int64 { return s.requests.Load() }

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	// Read the whole request first, so that no fault reaches the client as a
	// failed write of its body.
	_, _ = io.Copy(io.Discard, r.Body)
	switch s.reply.Fault {
	case FaultHang:
		if s.reply.Status != 0 {
			s.writeReply(w)
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
		}
		select {
		case <-s.release:
		case <-r.Context().Done():
		}
	case FaultTruncate:
		conn, buf := s.hijack(w)
		if conn == nil {
			return
		}
		defer conn.Close()
		status := s.status()
		fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\n", status, http.StatusText(status))
		for _, k := range sortedKeys(s.reply.Header) {
			fmt.Fprintf(buf, "%s: %s\r\n", k, s.reply.Header[k])
		}
		fmt.Fprintf(buf, "Content-Length: %d\r\n\r\n%s", len(s.reply.Body)+truncatedExtra, s.reply.Body)
		if err := buf.Flush(); err != nil {
			s.t.Errorf("providertest: writing the truncated response: %v", err)
		}
	case FaultReset:
		conn, _ := s.hijack(w)
		if conn == nil {
			return
		}
		if tcp, ok := conn.(*net.TCPConn); ok {
			_ = tcp.SetLinger(0) // Close sends RST instead of FIN
		}
		_ = conn.Close()
	default:
		s.writeReply(w)
	}
}

func (s *Server) status() int {
	if s.reply.Status == 0 {
		return http.StatusOK
	}
	return s.reply.Status
}

func (s *Server) writeReply(w http.ResponseWriter) {
	for k, v := range s.reply.Header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(s.status())
	_, _ = io.WriteString(w, s.reply.Body)
}

func (s *Server) hijack(w http.ResponseWriter) (net.Conn, *bufio.ReadWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		s.t.Errorf("providertest: %T cannot hijack the connection", w)
		return nil, nil
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		s.t.Errorf("providertest: hijacking the connection: %v", err)
		return nil, nil
	}
	return conn, buf
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
