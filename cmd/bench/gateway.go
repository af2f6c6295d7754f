package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentledger/ledger/internal/embedded"
	"github.com/agentledger/ledger/internal/names"
	_ "github.com/agentledger/ledger/internal/provider/builtin" // the providers the fake provider speaks
	"github.com/agentledger/ledger/internal/sim/fakeprovider"
	"github.com/agentledger/ledger/internal/topology"
)

// Targets of the gateway's overhead (issue 11).
const (
	targetGatewayP99Overhead = time.Millisecond
	targetGatewayRPS         = 5000
)

// Settings of the gateway benchmark: bounded in count and time, loopback
// only.
const (
	gatewayRate        = 1000             // requests/s of the latency phase
	gatewayLatencyTime = 10 * time.Second // measured, per path
	gatewayWarmup      = time.Second      // before each measured phase
	gatewaySlice       = time.Second      // of one path at a time, alternating, in the open-loop phases
	gatewaySatWorkers  = 64               // concurrent clients at saturation
	gatewaySatTime     = 5 * time.Second  // measured, per path
	gatewayTTFBRate    = 200              // streams/s of the time-to-first-byte phase
	gatewayTTFBTime    = 5 * time.Second  // measured, per path
	gatewayMaxInFlight = 4096             // bound of the open-loop generator
	gatewayCallTimeout = 30 * time.Second // one request's bound
	gatewayChatBody    = `{"model":"gpt-4.1-mini","max_completion_tokens":16,"messages":[{"role":"user","content":"Say hi."}]}`
	gatewayStreamBody  = `{"model":"claude-sonnet-4-5","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"Say hi."}]}`
)

// latencyStats are the percentiles of a phase, in milliseconds.
type latencyStats struct {
	N      int     `json:"n"`
	Errors int     `json:"errors"`
	P50Ms  float64 `json:"p50_ms"`
	P90Ms  float64 `json:"p90_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
}

// pathPair is one measurement of the direct path and the gateway's.
type pathPair struct {
	Direct        latencyStats `json:"direct"`
	Gateway       latencyStats `json:"gateway"`
	OverheadP50Ms float64      `json:"overhead_p50_ms"`
	OverheadP99Ms float64      `json:"overhead_p99_ms"`
}

// gatewayResult is the gateway's overhead against calling the fake
// provider directly, on the same machine.
type gatewayResult struct {
	Method string `json:"method"`
	// Latency: small non-streaming calls (OpenAI chat) at Rate requests/s.
	Latency struct {
		Rate    int     `json:"rate"`
		Seconds float64 `json:"seconds"`
		pathPair
	} `json:"latency"`
	// Saturation: Workers clients calling back to back.
	Saturation struct {
		Workers    int     `json:"workers"`
		Seconds    float64 `json:"seconds"`
		DirectRPS  float64 `json:"direct_rps"`
		GatewayRPS float64 `json:"gateway_rps"`
		Errors     int     `json:"errors"`
	} `json:"saturation"`
	// TTFB: Anthropic streams at Rate streams/s, time to the first event.
	TTFB struct {
		Rate    int     `json:"rate"`
		Seconds float64 `json:"seconds"`
		pathPair
	} `json:"ttfb"`
	// GatewayCalls and Events: the calls the gateway served and the
	// events it published for them (one each, with no faults).
	GatewayCalls uint64 `json:"gateway_calls"`
	Events       uint64 `json:"events"`
}

const gatewayMethod = "gateway as it ships (cmd/gateway, a child process, --forward-ledger-headers, publishing to an embedded JetStream server with file storage in this process) " +
	"in front of the fake provider (in this process, no faults), against the same calls made to the fake provider directly; load from this process over loopback HTTP/1.1 keep-alive; " +
	"open-loop phases alternate the two paths in 1 s slices; overhead = gateway percentile minus direct percentile"

// benchGateway measures the gateway's overhead.
func benchGateway(ctx context.Context, cfg config) (*gatewayResult, error) {
	rig, err := startRig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer rig.cleanup()
	res := &gatewayResult{Method: gatewayMethod}
	runErr := measureGateway(ctx, res, rig.fp.URL(), rig.gw.url)
	if err := rig.gw.stop(); err != nil && runErr == nil {
		runErr = err
	}
	if runErr != nil {
		return nil, runErr
	}
	return res, checkEvents(ctx, rig.js, res)
}

// rig is the gateway command (cmd/gateway built, or cfg.GatewayBin) as a
// child process in front of the fake provider (no faults), publishing to
// an embedded JetStream server with file storage, both in this process.
type rig struct {
	fp      *fakeprovider.Server
	js      jetstream.JetStream
	gw      *gatewayChild
	cleanup func() // stops all but the gateway, removes the files
}

// startRig starts a rig; extra are more flags of the gateway.
func startRig(ctx context.Context, cfg config, extra ...string) (_ *rig, err error) {
	var undo []func()
	cleanup := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	defer func() {
		if err != nil {
			cleanup()
		}
	}()
	dir, err := os.MkdirTemp("", "ledger-bench-gw-")
	if err != nil {
		return nil, err
	}
	undo = append(undo, func() { os.RemoveAll(dir) })
	bin := cfg.GatewayBin
	if bin == "" {
		if bin, err = buildGo(ctx, dir, "gateway"); err != nil {
			return nil, err
		}
	}
	srv, err := embedded.Start(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: filepath.Join(dir, "js"), NoLog: true})
	if err != nil {
		return nil, err
	}
	undo = append(undo, srv.Shutdown)
	js, closeJS, err := connectJS(ctx, srv.URL())
	if err != nil {
		return nil, err
	}
	undo = append(undo, closeJS)
	fp, err := fakeprovider.Listen("127.0.0.1:0", fakeprovider.Options{Seed: 1})
	if err != nil {
		return nil, err
	}
	undo = append(undo, fp.Close)
	gw, err := startGateway(ctx, bin, srv.URL(), fp.URL(), extra...)
	if err != nil {
		return nil, err
	}
	return &rig{fp: fp, js: js, gw: gw, cleanup: cleanup}, nil
}

// measureGateway runs the three phases, direct and through the gateway.
func measureGateway(ctx context.Context, res *gatewayResult, direct, gw string) error {
	lg := newLoadGen()
	defer lg.close()
	res.Latency.Rate, res.Latency.Seconds = gatewayRate, gatewayLatencyTime.Seconds()
	fmt.Fprintf(os.Stderr, "gateway: latency at %d req/s, %s per path\n", gatewayRate, gatewayLatencyTime)
	var err error
	if res.Latency.pathPair, err = lg.interleaved(ctx, lg.chat(direct, true), lg.chat(gw, false), gatewayRate, gatewayLatencyTime); err != nil {
		return err
	}

	res.Saturation.Workers, res.Saturation.Seconds = gatewaySatWorkers, gatewaySatTime.Seconds()
	fmt.Fprintf(os.Stderr, "gateway: saturation with %d clients, %s per path\n", gatewaySatWorkers, gatewaySatTime)
	var errs int
	if res.Saturation.DirectRPS, errs = lg.closedLoop(ctx, lg.chat(direct, true), gatewaySatWorkers, gatewaySatTime); errs > 0 {
		res.Saturation.Errors += errs
	}
	res.Saturation.GatewayRPS, errs = lg.closedLoop(ctx, lg.chat(gw, false), gatewaySatWorkers, gatewaySatTime)
	res.Saturation.Errors += errs

	res.TTFB.Rate, res.TTFB.Seconds = gatewayTTFBRate, gatewayTTFBTime.Seconds()
	fmt.Fprintf(os.Stderr, "gateway: time to first byte of streams at %d/s, %s per path\n", gatewayTTFBRate, gatewayTTFBTime)
	if res.TTFB.pathPair, err = lg.interleaved(ctx, lg.stream(direct, true), lg.stream(gw, false), gatewayTTFBRate, gatewayTTFBTime); err != nil {
		return err
	}
	res.GatewayCalls = lg.gatewayCalls.Load()
	if n := res.Latency.Direct.Errors + res.Latency.Gateway.Errors + res.Saturation.Errors + res.TTFB.Direct.Errors + res.TTFB.Gateway.Errors; n > 0 {
		return fmt.Errorf("gateway benchmark: %d calls failed (the fake provider injects no faults): %s", n, lg.firstError())
	}
	return nil
}

func (p *pathPair) overhead() {
	p.OverheadP50Ms = p.Gateway.P50Ms - p.Direct.P50Ms
	p.OverheadP99Ms = p.Gateway.P99Ms - p.Direct.P99Ms
}

// checkEvents checks that the gateway published one event per call it
// served: the figures are of a gateway that did all of its work.
func checkEvents(ctx context.Context, js jetstream.JetStream, res *gatewayResult) error {
	s, err := js.Stream(ctx, names.AttemptsStream)
	if err != nil {
		return err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return err
	}
	res.Events = info.State.Msgs
	if res.Events != res.GatewayCalls {
		return fmt.Errorf("gateway benchmark: %d calls through the gateway but %d events in %s", res.GatewayCalls, res.Events, names.AttemptsStream)
	}
	return nil
}

func connectJS(ctx context.Context, url string) (jetstream.JetStream, func(), error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err == nil {
		_, err = topology.EnsureAttempts(ctx, js, topology.Config{})
	}
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return js, nc.Close, nil
}

// gatewayChild is the gateway command running as a child process.
type gatewayChild struct {
	cmd    *exec.Cmd
	url    string
	stderr *bytes.Buffer
}

// startGateway starts the built gateway in front of the fake provider, the
// origin of every provider it speaks (--NAME-url), and waits until it
// listens.
func startGateway(ctx context.Context, bin, natsURL, upstream string, extra ...string) (*gatewayChild, error) {
	args := []string{"run", "--nats-url", natsURL, "--listen", "127.0.0.1:0", "--forward-ledger-headers", "--log-level", "warn"}
	for _, d := range fakeprovider.Dialects() {
		args = append(args, "--"+d.Provider+"-url", upstream)
	}
	args = append(args, extra...)
	cmd := exec.CommandContext(ctx, bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	g := &gatewayChild{cmd: cmd, stderr: &bytes.Buffer{}}
	cmd.Stderr = g.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the gateway: %w", err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	_, url, ok := strings.Cut(strings.TrimSpace(line), "listening on ")
	if err != nil || !ok {
		_ = g.stop()
		return nil, fmt.Errorf("the gateway did not start: %q: %v: %s", line, err, g.stderr)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	g.url = url
	return g, nil
}

// stop stops the gateway as SIGTERM does, which drains its events.
func (g *gatewayChild) stop() error {
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	if err := g.cmd.Wait(); err != nil {
		return fmt.Errorf("the gateway exited with %w: %s", err, g.stderr)
	}
	return nil
}

// loadGen makes the benchmark's calls over one keep-alive transport.
type loadGen struct {
	client       *http.Client
	seq          atomic.Uint64 // request IDs of the direct calls
	gatewayCalls atomic.Uint64
	mu           sync.Mutex
	first        error
}

func newLoadGen() *loadGen {
	tr := &http.Transport{MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096, IdleConnTimeout: time.Minute, DisableCompression: true}
	return &loadGen{client: &http.Client{Transport: tr, Timeout: gatewayCallTimeout}}
}

func (lg *loadGen) close() { lg.client.CloseIdleConnections() }

// call is one request; it returns the time that counts (to the whole
// answer, or to a stream's first event).
type call func(ctx context.Context) (time.Duration, error)

// chat is a small OpenAI chat completion, read whole. Direct calls carry
// the ledger headers the fake provider needs; the gateway adds them.
func (lg *loadGen) chat(base string, direct bool) call {
	return func(ctx context.Context) (time.Duration, error) {
		start := time.Now()
		resp, err := lg.do(ctx, base+"/v1/chat/completions", gatewayChatBody, "Authorization", "Bearer bench-key", direct)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return 0, err
		}
		return time.Since(start), nil
	}
}

// stream is an Anthropic message stream, timed to its first event and
// then read whole.
func (lg *loadGen) stream(base string, direct bool) call {
	return func(ctx context.Context) (time.Duration, error) {
		start := time.Now()
		resp, err := lg.do(ctx, base+"/v1/messages", gatewayStreamBody, "X-Api-Key", "bench-key", direct)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		rd := bufio.NewReader(resp.Body)
		if _, err := rd.ReadString('\n'); err != nil {
			return 0, fmt.Errorf("the stream's first event: %w", err)
		}
		ttfb := time.Since(start)
		if _, err := io.Copy(io.Discard, rd); err != nil {
			return 0, err
		}
		return ttfb, nil
	}
}

func (lg *loadGen) do(ctx context.Context, url, body, keyHeader, key string, direct bool) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(keyHeader, key)
	req.Header.Set(fakeprovider.HeaderSessionID, "bench")
	if direct {
		req.Header.Set(fakeprovider.HeaderRequestID, "direct-"+strconv.FormatUint(lg.seq.Add(1), 10))
		req.Header.Set(fakeprovider.HeaderAttempt, "0")
	} else {
		lg.gatewayCalls.Add(1)
	}
	resp, err := lg.client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, fmt.Errorf("%s: %s: %s", url, resp.Status, b)
	}
	return resp, nil
}

func (lg *loadGen) fail(err error) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	if lg.first == nil {
		lg.first = err
	}
}

func (lg *loadGen) firstError() error {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	return lg.first
}

// interleaved measures the direct path and the gateway's in alternate
// slices of gatewaySlice, each an open loop at rate, for d each in all
// (after a warm-up of both): whatever else loads the machine meanwhile
// falls on both paths alike, so that their difference is the gateway's.
func (lg *loadGen) interleaved(ctx context.Context, direct, gw call, rate int, d time.Duration) (pathPair, error) {
	var p pathPair
	if _, err := lg.openLoop(ctx, direct, rate, gatewayWarmup); err != nil {
		return p, err
	}
	if _, err := lg.openLoop(ctx, gw, rate, gatewayWarmup); err != nil {
		return p, err
	}
	var dl, gl samples
	for done := time.Duration(0); done < d; done += gatewaySlice {
		s, err := lg.openLoop(ctx, direct, rate, gatewaySlice)
		if err != nil {
			return p, err
		}
		dl.add(s)
		if s, err = lg.openLoop(ctx, gw, rate, gatewaySlice); err != nil {
			return p, err
		}
		gl.add(s)
	}
	p.Direct, p.Gateway = dl.stats(), gl.stats()
	p.overhead()
	return p, nil
}

// samples are the latencies of calls, and which failed.
type samples struct {
	lat    []time.Duration
	failed []bool
}

func (s *samples) add(o samples) {
	s.lat = append(s.lat, o.lat...)
	s.failed = append(s.failed, o.failed...)
}

func (s *samples) stats() latencyStats { return percentiles(s.lat, s.failed) }

// openLoop starts calls at rate per second for d, whatever the answers'
// pace (an open loop: a slow answer does not delay the next call).
func (lg *loadGen) openLoop(ctx context.Context, c call, rate int, d time.Duration) (samples, error) {
	n := int(d.Seconds() * float64(rate))
	interval := time.Second / time.Duration(rate)
	s := samples{lat: make([]time.Duration, n), failed: make([]bool, n)}
	sem := make(chan struct{}, gatewayMaxInFlight)
	var wg sync.WaitGroup
	defer wg.Wait()
	start := time.Now()
	for i := range n {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return s, ctx.Err()
		}
		wg.Go(func() {
			defer func() { <-sem }()
			var err error
			if s.lat[i], err = c(ctx); err != nil {
				s.failed[i] = true
				lg.fail(err)
			}
		})
	}
	return s, nil
}

// closedLoop runs workers clients, each calling back to back, for the
// warm-up and then d, and returns the calls per second of d.
func (lg *loadGen) closedLoop(ctx context.Context, c call, workers int, d time.Duration) (rps float64, errs int) {
	var done, failed atomic.Int64
	var measuring atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, err := c(ctx)
				if !measuring.Load() {
					continue
				}
				if err != nil {
					failed.Add(1)
					lg.fail(err)
					continue
				}
				done.Add(1)
			}
		})
	}
	time.Sleep(gatewayWarmup)
	measuring.Store(true)
	start := time.Now()
	time.Sleep(d)
	n := done.Load()
	elapsed := time.Since(start)
	close(stop)
	wg.Wait()
	return float64(n) / elapsed.Seconds(), int(failed.Load())
}

// percentiles of the calls that did not fail.
func percentiles(lat []time.Duration, failed []bool) latencyStats {
	ok := make([]time.Duration, 0, len(lat))
	s := latencyStats{}
	for i, d := range lat {
		if failed[i] {
			s.Errors++
			continue
		}
		ok = append(ok, d)
	}
	slices.Sort(ok)
	s.N = len(ok)
	if s.N == 0 {
		return s
	}
	at := func(q float64) float64 {
		i := min(int(q*float64(s.N)), s.N-1)
		return float64(ok[i]) / float64(time.Millisecond)
	}
	s.P50Ms, s.P90Ms, s.P99Ms, s.P999Ms = at(0.50), at(0.90), at(0.99), at(0.999)
	s.MaxMs = float64(ok[s.N-1]) / float64(time.Millisecond)
	return s
}

// evaluateGateway checks the gateway's targets.
func evaluateGateway(g *gatewayResult) []check {
	if g == nil {
		return nil
	}
	p99 := g.Latency.OverheadP99Ms
	return []check{
		newCheck(fmt.Sprintf("gateway: p99 overhead at %d req/s < %s", gatewayRate, targetGatewayP99Overhead), fmt.Sprintf("%.3f ms", p99), p99 < float64(targetGatewayP99Overhead)/float64(time.Millisecond)),
		newCheck(fmt.Sprintf("gateway: >= %d req/s at saturation", targetGatewayRPS), fmt.Sprintf("%.0f", g.Saturation.GatewayRPS), g.Saturation.GatewayRPS >= targetGatewayRPS),
	}
}

// printGateway prints the gateway's figures.
func printGateway(out io.Writer, g *gatewayResult) {
	if g == nil {
		return
	}
	fmt.Fprintf(out, "gateway (%s)\n", g.Method)
	row := func(name string, p pathPair) {
		fmt.Fprintf(out, "  %s: direct p50 %.3f p99 %.3f ms; gateway p50 %.3f p99 %.3f ms; overhead p50 %+.3f p99 %+.3f ms (n=%d, %d)\n", name,
			p.Direct.P50Ms, p.Direct.P99Ms, p.Gateway.P50Ms, p.Gateway.P99Ms, p.OverheadP50Ms, p.OverheadP99Ms, p.Direct.N, p.Gateway.N)
	}
	row(fmt.Sprintf("small calls at %d req/s", g.Latency.Rate), g.Latency.pathPair)
	fmt.Fprintf(out, "  saturation (%d clients): direct %.0f req/s, gateway %.0f req/s\n", g.Saturation.Workers, g.Saturation.DirectRPS, g.Saturation.GatewayRPS)
	row(fmt.Sprintf("stream time to first byte at %d/s", g.TTFB.Rate), g.TTFB.pathPair)
	fmt.Fprintf(out, "  %d calls through the gateway, %d events published\n\n", g.GatewayCalls, g.Events)
}
