package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Settings of the upload and connection floods (issue 17): the attacks
// that took the old gateway to 1.62 GB of RSS with 20 uploads, 4.74 GB
// with 200 slow connections declaring 32 MiB held meanwhile, and to its
// 20,000 file descriptors with slow bodies.
const (
	uploadConcurrent   = 20        // uploads at once
	uploadBytes        = 100 << 20 // each one's body, over the 32 MiB per-request limit
	uploadSlowConns    = 200       // connections declaring uploadDeclared, sending a few bytes, held
	uploadDeclared     = 32 << 20
	uploadHeldRounds   = 2 // rounds of uploads while they are held
	uploadTimeout      = 2 * time.Minute
	connFloodConns     = 10000 // slow-body connections, more than the default cap (8192)
	connFloodDialers   = 64
	uploadMethodFormat = "gateway as it ships (%s, a child process, default limits) in front of the fake provider; %d concurrent chunked uploads (no declared length) of %d MiB to /v1/messages from this process over loopback, " +
		"then %d connections declaring %d MiB and sending 16 bytes held open while %d more rounds of the uploads run; peak RSS = the gateway's VmHWM; " +
		"then %d connections each sending headers and one byte of a 1 MB body, and a normal call once all are open"
)

// uploadPhase is one phase of the flood.
type uploadPhase struct {
	Rounds  int            `json:"rounds"`
	Seconds float64        `json:"seconds"`
	Answers map[string]int `json:"answers"` // HTTP status, or "cut" for a connection closed before an answer
	// PeakRSSBytes is the gateway's VmHWM at the end of the phase (peak
	// since it started).
	PeakRSSBytes uint64 `json:"peak_rss_bytes"`
}

// uploadResult is the gateway's memory under an upload flood.
type uploadResult struct {
	Method          string      `json:"method"`
	Gateway         string      `json:"gateway"`
	StartRSSBytes   uint64      `json:"start_rss_bytes"`
	Flood           uploadPhase `json:"flood"`
	HeldSlowConns   int         `json:"held_slow_conns"`
	FloodWhileHeld  uploadPhase `json:"flood_while_held"`
	ConnFlood       connFlood   `json:"conn_flood"`
	BudgetRefusals  int         `json:"budget_refusals"`   // 503 answers
	LimitRefusals   int         `json:"limit_refusals"`    // 413 answers
	OtherErrorCount int         `json:"other_error_count"` // anything but 413, 503 or a cut
}

// benchUpload runs the upload flood against the gateway.
func benchUpload(ctx context.Context, cfg config) (*uploadResult, error) {
	rig, err := startRig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer rig.cleanup()
	status := "/proc/" + strconv.Itoa(rig.gw.cmd.Process.Pid) + "/status"
	gwName := "cmd/gateway built from this tree"
	if cfg.GatewayBin != "" {
		gwName = cfg.GatewayBin
	}
	res := &uploadResult{Method: fmt.Sprintf(uploadMethodFormat, gwName, uploadConcurrent, uploadBytes>>20, uploadSlowConns, uploadDeclared>>20, uploadHeldRounds, connFloodConns),
		Gateway: gwName, StartRSSBytes: procKiB(status, "VmRSS")}
	runErr := func() error {
		fmt.Fprintf(os.Stderr, "upload flood: %d concurrent uploads of %d MiB\n", uploadConcurrent, uploadBytes>>20)
		res.Flood = floodRounds(ctx, rig.gw.url, 1, status)
		host := strings.TrimPrefix(rig.gw.url, "http://")
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for range uploadSlowConns {
			c, err := net.Dial("tcp", host)
			if err != nil {
				return fmt.Errorf("upload flood: slow connection %d: %w", len(held), err)
			}
			held = append(held, c)
			if _, err := fmt.Fprintf(c, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nX-Api-Key: slow-%d\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"model\":\"m\",\"x\":1", len(held), uploadDeclared); err != nil {
				return fmt.Errorf("upload flood: slow connection %d: %w", len(held), err)
			}
		}
		res.HeldSlowConns = len(held)
		fmt.Fprintf(os.Stderr, "upload flood: %d rounds while %d connections declaring %d MiB are held\n", uploadHeldRounds, len(held), uploadDeclared>>20)
		res.FloodWhileHeld = floodRounds(ctx, rig.gw.url, uploadHeldRounds, status)
		for _, c := range held {
			c.Close()
		}
		held = nil
		fmt.Fprintf(os.Stderr, "connection flood: %d connections sending their body a byte at a time, then a normal call\n", connFloodConns)
		var err error
		res.ConnFlood, err = floodConns(ctx, rig.gw.url, rig.gw.cmd.Process.Pid)
		return err
	}()
	if err := rig.gw.stop(); err != nil && runErr == nil {
		runErr = err
	}
	if runErr != nil {
		return nil, runErr
	}
	for _, p := range []uploadPhase{res.Flood, res.FloodWhileHeld} {
		for a, n := range p.Answers {
			switch a {
			case "503":
				res.BudgetRefusals += n
			case "413":
				res.LimitRefusals += n
			case "cut":
			default:
				res.OtherErrorCount += n
			}
		}
	}
	return res, nil
}

// connFlood is one client holding more connections than the cap, each
// sending its body a byte at a time, and a normal call meanwhile.
type connFlood struct {
	Opened int `json:"opened"` // connections the client opened and wrote headers to
	Failed int `json:"failed"` // connections it could not open within 3 s
	// PeakGatewayFDs is the most file descriptors the gateway had open
	// (connections, NATS, listeners, files) while they were held.
	PeakGatewayFDs int `json:"peak_gateway_fds"`
	// NormalCallStatus and NormalCallSeconds: a normal call made once all
	// were opened.
	NormalCallStatus  string  `json:"normal_call_status"`
	NormalCallSeconds float64 `json:"normal_call_seconds"`
	// TimedOut are the slow connections answered 408 (the rest were
	// closed or not yet answered when the client gave up, after 30 s).
	TimedOut int `json:"timed_out"`
}

// floodConns runs the connection flood against the gateway of pid.
func floodConns(ctx context.Context, url string, pid int) (connFlood, error) {
	var f connFlood
	host := strings.TrimPrefix(url, "http://")
	fds := func() int {
		ents, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
		return len(ents)
	}
	var mu sync.Mutex
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	next := make(chan int)
	var wg sync.WaitGroup
	for range connFloodDialers {
		wg.Go(func() {
			d := net.Dialer{Timeout: 3 * time.Second}
			for i := range next {
				c, err := d.DialContext(ctx, "tcp", host)
				if err == nil {
					_, err = fmt.Fprintf(c, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nX-Api-Key: conn-%d\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{", i)
				}
				mu.Lock()
				if err != nil {
					f.Failed++
					if c != nil {
						c.Close()
					}
				} else {
					conns = append(conns, c)
				}
				if len(conns)%500 == 0 {
					f.PeakGatewayFDs = max(f.PeakGatewayFDs, fds())
				}
				mu.Unlock()
			}
		})
	}
	for i := range connFloodConns {
		next <- i
	}
	close(next)
	wg.Wait()
	f.Opened = len(conns)
	f.PeakGatewayFDs = max(f.PeakGatewayFDs, fds())

	start := time.Now()
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/messages",
		strings.NewReader(`{"model":"claude-x","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		return f, err
	}
	req.Header.Set("X-Api-Key", "normal")
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	f.NormalCallSeconds = time.Since(start).Seconds()
	f.NormalCallStatus = "timed out"
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		f.NormalCallStatus = strconv.Itoa(resp.StatusCode)
	}
	f.PeakGatewayFDs = max(f.PeakGatewayFDs, fds())

	// How the slow connections ended: read each answer's status line.
	deadline := time.Now().Add(30 * time.Second)
	for _, c := range conns {
		_ = c.SetReadDeadline(deadline)
	}
	var answered sync.WaitGroup
	var timedOut atomic.Int64
	for _, c := range conns {
		answered.Go(func() {
			line := make([]byte, 12)
			if n, _ := io.ReadFull(c, line); n == len(line) && string(line[9:12]) == "408" {
				timedOut.Add(1)
			}
		})
	}
	answered.Wait()
	f.TimedOut = int(timedOut.Load())
	return f, nil
}

// floodRounds runs rounds of uploadConcurrent uploads at once, and reads
// the gateway's peak RSS after.
func floodRounds(ctx context.Context, url string, rounds int, status string) uploadPhase {
	p := uploadPhase{Rounds: rounds, Answers: map[string]int{}}
	client := &http.Client{Timeout: uploadTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
	var mu sync.Mutex
	start := time.Now()
	for range rounds {
		var wg sync.WaitGroup
		for i := range uploadConcurrent {
			wg.Go(func() {
				a := upload(ctx, client, url, i)
				mu.Lock()
				p.Answers[a]++
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	p.Seconds = time.Since(start).Seconds()
	p.PeakRSSBytes = procKiB(status, "VmHWM")
	return p
}

// upload sends one uploadBytes body, and returns the answer's status, or
// "cut".
func upload(ctx context.Context, client *http.Client, url string, i int) string {
	body := io.LimitReader(filler{}, uploadBytes)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/messages", body)
	if err != nil {
		return "cut"
	}
	req.ContentLength = -1 // chunked: the gateway must read to learn it is too large
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", "flood-"+strconv.Itoa(i))
	resp, err := client.Do(req)
	if err != nil {
		return "cut"
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return strconv.Itoa(resp.StatusCode)
}

// filler reads as an endless JSON string's content.
type filler struct{}

func (filler) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

// printUpload prints the upload flood's figures.
func printUpload(out io.Writer, u *uploadResult) {
	if u == nil {
		return
	}
	mib := func(b uint64) float64 { return float64(b) / (1 << 20) }
	answers := func(m map[string]int) string {
		var parts []string
		for k, n := range m {
			parts = append(parts, fmt.Sprintf("%s×%d", k, n))
		}
		sort.Strings(parts)
		return strings.Join(parts, " ")
	}
	fmt.Fprintf(out, "upload flood (%s)\n", u.Method)
	fmt.Fprintf(out, "  at start: %.0f MiB RSS\n", mib(u.StartRSSBytes))
	fmt.Fprintf(out, "  %d uploads at once: peak RSS %.0f MiB (%.1f s; answers %s)\n", uploadConcurrent, mib(u.Flood.PeakRSSBytes), u.Flood.Seconds, answers(u.Flood.Answers))
	fmt.Fprintf(out, "  %d rounds with %d slow connections held: peak RSS %.0f MiB (%.1f s; answers %s)\n", u.FloodWhileHeld.Rounds, u.HeldSlowConns,
		mib(u.FloodWhileHeld.PeakRSSBytes), u.FloodWhileHeld.Seconds, answers(u.FloodWhileHeld.Answers))
	cf := u.ConnFlood
	fmt.Fprintf(out, "  %d slow-body connections opened (%d could not be): gateway peak %d file descriptors; a normal call meanwhile: %s in %.1f s; %d slow bodies answered 408\n\n",
		cf.Opened, cf.Failed, cf.PeakGatewayFDs, cf.NormalCallStatus, cf.NormalCallSeconds, cf.TimedOut)
}
