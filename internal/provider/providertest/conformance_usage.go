package providertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/provider"
)

// testBodies checks BodyUsage on the Features' whole responses.
func testBodies(t suiteT, p provider.Provider, f *Features) {
	required(t, "Bodies", len(f.Bodies))
	for _, bc := range f.Bodies {
		t.Run(bc.Name, func(t suiteT) {
			rt := mustMatch(t, p, bc.Path)
			a, ok := bodyUsage(t, p, rt, header(bc.Header), []byte(bc.Body))
			if bc.NoUsage {
				assert.False(t, ok, "BodyUsage: the body carries no usage")
				assert.Zero(t, a.Usage, "usage of a body without usage")
				return
			}
			assert.True(t, ok, "BodyUsage: the body carries usage")
			assert.Equal(t, bc.Usage, a.Usage, "usage")
			assert.Equal(t, bc.ProviderID, a.ProviderID, "provider ID")
			assert.Equal(t, bc.ServiceTier, a.ServiceTier, "service tier")
		})
	}
}

func bodyUsage(t suiteT, p provider.Provider, rt provider.Route, h map[string][]string, body []byte) (a provider.Answer, ok bool) {
	t.Helper()
	noPanic(t, "BodyUsage("+describe(body)+")", func() { a, ok = p.BodyUsage(rt, h, body) })
	return a, ok
}

// testBodyInvariants checks what every provider's BodyUsage does: no
// usage from a body that is not JSON, and never a panic, a negative count
// or an ID that does not fit the contract, whatever the body; the
// Features' own bodies, cut short or with every number negated, included.
func testBodyInvariants(t suiteT, p provider.Provider, f *Features) {
	var samples [][]byte
	for _, bc := range f.Bodies {
		samples = append(samples, []byte(bc.Body))
	}
	for _, rc := range f.Routes {
		rt, ok := match(t, p, rc.Path)
		if !ok {
			continue
		}
		for _, b := range append(notJSONBytes(), garbage(8)...) {
			a, ok := bodyUsage(t, p, rt, nil, b)
			assert.False(t, ok, "BodyUsage(%s, %s): a body that is not JSON has no usage", rc.Path, describe(b))
			assert.Zero(t, a, "BodyUsage(%s, %s)", rc.Path, describe(b))
		}
		for _, b := range mangled(samples, oddJSON) {
			a, _ := bodyUsage(t, p, rt, nil, b)
			checkUsage(t, a.Usage, "BodyUsage(%s, %s)", rc.Path, describe(b))
			checkID(t, a.ProviderID, "BodyUsage(%s, %s)", rc.Path, describe(b))
			checkTier(t, a.ServiceTier, "BodyUsage(%s, %s)", rc.Path, describe(b))
		}
	}
}

// testStreams checks a stream's accountant on the Features' complete
// streams: the verdict of every event, the usage, the provider's ID and
// whether the stream reached its end.
func testStreams(t suiteT, p provider.Provider, f *Features) {
	required(t, "Streams", len(f.Streams))
	for _, sc := range f.Streams {
		t.Run(sc.Name, func(t suiteT) {
			s := newStream(t, p, sc)
			for i, ev := range sc.Events {
				want := provider.Verdict{Drop: slices.Contains(sc.Drop, i), Error: slices.Contains(sc.Errors, i)}
				got := observe(t, s, ev)
				assert.Equal(t, want, got, "verdict of event %d %s", i, describe([]byte(ev.Data)))
				checkUsage(t, s.Usage(), "usage after event %d", i)
			}
			assert.Equal(t, sc.Usage, s.Usage(), "usage")
			assert.Equal(t, sc.ProviderID, s.ProviderID(), "provider ID")
			assert.Equal(t, sc.ServiceTier, s.ServiceTier(), "service tier")
			assert.Equal(t, !sc.Incomplete, s.Complete(), "complete")
		})
	}
}

// newStream makes the accountant of sc as the gateway does: the route of
// its path, its request inspected, its response's header.
func newStream(t suiteT, p provider.Provider, sc StreamCase) (s provider.Stream) {
	t.Helper()
	rt := mustMatch(t, p, sc.Path)
	req := inspect(t, p, rt, []byte(sc.Request))
	noPanic(t, "NewStream", func() { s = p.NewStream(rt, header(sc.Header), req) })
	if s == nil {
		t.Fatalf("NewStream returned nil")
	}
	return s
}

func observe(t suiteT, s provider.Stream, ev Event) (v provider.Verdict) {
	t.Helper()
	noPanic(t, fmt.Sprintf("Observe(%q, %s)", ev.Name, describe([]byte(ev.Data))), func() { v = s.Observe(ev.Name, []byte(ev.Data)) })
	return v
}

// testCuts breaks the Features' streams where their Cuts say, and checks
// what the accountant says then.
func testCuts(t suiteT, p provider.Provider, f *Features) {
	for _, sc := range f.Streams {
		for _, c := range sc.Cuts {
			t.Run(fmt.Sprintf("%s/after %d", sc.Name, c.After), func(t suiteT) {
				if c.After <= 0 || c.After >= len(sc.Events) {
					t.Fatalf("Cut.After %d: a cut is after 1 to %d events of the %d", c.After, len(sc.Events)-1, len(sc.Events))
				}
				s := newStream(t, p, sc)
				for _, ev := range sc.Events[:c.After] {
					observe(t, s, ev)
				}
				assert.Equal(t, c.Usage, s.Usage(), "usage of the broken stream")
				assert.Equal(t, c.Complete, s.Complete(), "complete")
				if c.Usage != sc.Usage && c.Lost == "" {
					t.Errorf("Cut.Lost is empty: the broken stream's usage %+v is not the whole stream's %+v, so say what it cannot tell", c.Usage, sc.Usage)
				}
			})
		}
	}
}

// testStreamInvariants checks what every provider's accountant does,
// whatever the events: it never panics, never reports a negative count
// and never an ID that does not fit the contract. The events are the
// Features' own, cut at every point, cut short, with every number
// negated, and garbage.
func testStreamInvariants(t suiteT, p provider.Provider, f *Features) {
	for _, sc := range f.Streams {
		t.Run(sc.Name, func(t suiteT) {
			for i := range len(sc.Events) + 1 {
				s := newStream(t, p, sc)
				for _, ev := range sc.Events[:i] {
					observe(t, s, ev)
				}
				checkUsage(t, s.Usage(), "usage after %d events", i)
				checkID(t, s.ProviderID(), "provider ID after %d events", i)
				checkTier(t, s.ServiceTier(), "service tier after %d events", i)
			}

			names := []string{"", "bogus"}
			var data [][]byte
			for _, ev := range sc.Events {
				if !slices.Contains(names, ev.Name) {
					names = append(names, ev.Name)
				}
				data = append(data, []byte(ev.Data))
			}
			odd := append(mangled(data, oddJSON), notJSONBytes()...)
			odd = append(odd, garbage(8)...)
			// Each odd event alone, and all of them after the real ones.
			whole := newStream(t, p, sc)
			for _, ev := range sc.Events {
				observe(t, whole, ev)
			}
			for _, name := range names {
				for _, d := range odd {
					s := newStream(t, p, sc)
					observe(t, s, Event{Name: name, Data: string(d)})
					checkUsage(t, s.Usage(), "usage after the event %q %s", name, describe(d))
					checkID(t, s.ProviderID(), "provider ID after the event %q %s", name, describe(d))
					checkTier(t, s.ServiceTier(), "service tier after the event %q %s", name, describe(d))
					observe(t, whole, Event{Name: name, Data: string(d)})
					checkUsage(t, whole.Usage(), "usage of the stream after the event %q %s", name, describe(d))
				}
			}
		})
	}
}

// checkUsage fails t when a count of u is negative, or a subset exceeds
// its whole (the 1-hour cache write its cache write, the reasoning its
// output).
func checkUsage(t suiteT, u events.Usage, format string, args ...any) {
	t.Helper()
	if u.InputTokens < 0 || u.OutputTokens < 0 || u.CacheReadInputTokens < 0 || u.CacheCreationInputTokens < 0 ||
		u.CacheCreation1hInputTokens < 0 || u.ReasoningTokens < 0 {
		t.Errorf("%s: negative usage %+v", fmt.Sprintf(format, args...), u)
	}
	if u.CacheCreation1hInputTokens > u.CacheCreationInputTokens || u.ReasoningTokens > u.OutputTokens {
		t.Errorf("%s: a subset exceeds its whole in %+v", fmt.Sprintf(format, args...), u)
	}
}

// checkTier fails t when tier is not in the contract's form (what
// events.ServiceTier makes of it).
func checkTier(t suiteT, tier string, format string, args ...any) {
	t.Helper()
	if events.ServiceTier(tier) != tier {
		t.Errorf("%s: service tier %q is not in the contract's form (lower case, at most %d bytes of a-z, 0-9, '_', '-')",
			fmt.Sprintf(format, args...), tier, events.MaxServiceTierLength)
	}
}

// checkID fails t when id does not fit the contract's provider request ID.
func checkID(t suiteT, id string, format string, args ...any) {
	t.Helper()
	if len(id) > events.MaxProviderReqID || !utf8.ValidString(id) {
		t.Errorf("%s: ID %q does not fit the contract (UTF-8, at most %d bytes)", fmt.Sprintf(format, args...), id, events.MaxProviderReqID)
	}
}

func notJSONBytes() [][]byte {
	out := make([][]byte, len(notJSON))
	for i, s := range notJSON {
		out[i] = []byte(s)
	}
	return out
}

// mangled returns the samples cut short at a few points, with every
// number negated and with every number made huge, followed by extra.
func mangled(samples [][]byte, extra []string) [][]byte {
	var out [][]byte
	for _, s := range samples {
		for _, n := range []int{1, len(s) / 3, len(s) / 2, len(s) - 1} {
			if n > 0 && n < len(s) {
				out = append(out, s[:n])
			}
		}
		for _, fn := range []func(json.Number) json.Number{negate, huge} {
			if m, ok := mapNumbers(s, fn); ok {
				out = append(out, m)
			}
		}
	}
	for _, e := range extra {
		out = append(out, []byte(e))
	}
	return out
}

func negate(n json.Number) json.Number {
	if s, ok := strings.CutPrefix(string(n), "-"); ok {
		return json.Number(s)
	}
	return "-" + n
}

func huge(json.Number) json.Number { return "9223372036854775807" }

// mapNumbers returns the JSON document b with fn applied to every number
// in it; ok is false when b is not JSON.
func mapNumbers(b []byte, fn func(json.Number) json.Number) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil, false
	}
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case json.Number:
			return fn(x)
		case map[string]any:
			for k, e := range x {
				x[k] = walk(e)
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		}
		return v
	}
	out, err := json.Marshal(walk(v))
	return out, err == nil
}
