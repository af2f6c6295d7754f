package gateway

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/sim/fakeprovider"
	"github.com/agentledger/ledger/internal/topology"
)

// BenchmarkChat is one small OpenAI chat completion, called directly on
// the fake provider and through the gateway (in this process, events to
// a discarding sink): the difference of the two is the gateway's own
// cost per call, in time and allocations.
func BenchmarkChat(b *testing.B) {
	fp, err := fakeprovider.Listen("127.0.0.1:0", fakeprovider.Options{Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer fp.Close()
	h := newHarness(b, fp.URL(), func(c *Config) {
		c.Retry.Sink = discardSink{}
		c.ForwardLedgerHeaders = true
	})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
	var seq atomic.Uint64
	for _, path := range []struct {
		name, base string
		direct     bool
	}{{"direct", fp.URL(), true}, {"gateway", h.url, false}} {
		b.Run(path.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req, _ := http.NewRequest(http.MethodPost, path.base+"/v1/chat/completions", strings.NewReader(benchChatBody))
					req.Header.Set("Authorization", "Bearer bench")
					req.Header.Set(fakeprovider.HeaderSessionID, "bench")
					if path.direct {
						req.Header.Set(fakeprovider.HeaderRequestID, "r"+strconv.FormatUint(seq.Add(1), 10))
						req.Header.Set(fakeprovider.HeaderAttempt, "0")
					}
					resp, err := client.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Errorf("status %s", resp.Status)
						return
					}
				}
			})
		})
	}
}

const benchChatBody = `{"model":"gpt-4.1-mini","max_completion_tokens":16,"messages":[{"role":"user","content":"Say hi."}]}`

// discardSink drops every event.
type discardSink struct{}

func (discardSink) Publish(context.Context, *events.Attempt) error { return nil }

// BenchmarkReserveNamed is the reservation of a new named request's
// attempt numbers on an embedded JetStream server: the create alone (no
// ledger), and with the look-up of the request in the ledger first (the
// gateway's way since the numbers continue from the ledger).
func BenchmarkReserveNamed(b *testing.B) {
	_, _, js := natstest.StartJS(b)
	ctx := context.Background()
	kv, err := topology.EnsureGatewayAttempts(ctx, js, topology.Config{}, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := topology.EnsureBucket(ctx, js, topology.Config{}, names.RequestsBucket, "bench"); err != nil {
		b.Fatal(err)
	}
	var seq atomic.Uint64
	for _, bc := range []struct {
		name   string
		ledger RequestLedger
	}{{"no-ledger", nil}, {"ledger", NewKVLedger(js)}} {
		store := NewKVAttempts(kv, bc.ledger)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := store.Reserve(ctx, "bench-"+strconv.FormatUint(seq.Add(1), 10), "s", 3); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
