package projection

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/topology"
)

// shortReplies makes every batched read ask for at most n bytes per reply,
// for the rest of the test.
func shortReplies(t testing.TB, n int) {
	t.Helper()
	old := multiGetMaxBytes
	multiGetMaxBytes = n
	t.Cleanup(func() { multiGetMaxBytes = old })
}

// A batched read whose replies the server cuts short (max_bytes) still
// returns every key exactly as single reads see it: present keys with
// their value and revision, deleted keys with the delete marker's
// revision, absent keys not at all; across several requests of 1,024 keys
// and more requests than fit in the window at once.
func TestGetManyContinuesShortReplies(t *testing.T) {
	ctx := context.Background()
	_, _, js := natstest.StartJS(t)
	kv, err := topology.EnsureBucket(ctx, js, topology.Config{}, "t_many", "test")
	require.NoError(t, err)
	b, err := newBucket(ctx, js, kv)
	require.NoError(t, err)

	const n = 2500
	want := map[string]stored{}
	var keys []string
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("k%d", i)
		keys = append(keys, key)
		switch {
		case i%7 == 3: // never written: absent
		case i%11 == 5: // written, then deleted
			_, err := kv.Put(ctx, key, []byte("gone"))
			require.NoError(t, err)
			require.NoError(t, kv.Delete(ctx, key))
			want[key] = stored{}
		default:
			value := []byte(strings.Repeat(string(rune('a'+i%26)), 100+i%900))
			rev, err := kv.Put(ctx, key, value)
			require.NoError(t, err)
			want[key] = stored{value: value, rev: rev}
		}
	}
	// The revision of a delete marker is the last sequence of its subject.
	for key, st := range want {
		if st.value == nil {
			m, err := b.stream.GetLastMsgForSubject(ctx, b.prefix+key)
			require.NoError(t, err)
			want[key] = stored{rev: m.Sequence}
		}
	}

	for _, tc := range []struct{ keys, maxBytes int }{{200, 1}, {n, 3000}, {n, multiGetMaxBytes}} {
		t.Run(fmt.Sprintf("keys=%d/max_bytes=%d", tc.keys, tc.maxBytes), func(t *testing.T) {
			shortReplies(t, tc.maxBytes)
			got, err := b.getMany(ctx, keys[:tc.keys])
			require.NoError(t, err)
			found := 0
			for _, key := range keys[:tc.keys] {
				w, exists := want[key]
				if !exists {
					require.NotContains(t, got, key)
					continue
				}
				found++
				g, ok := got[key]
				require.True(t, ok, "key %s missing", key)
				require.Equal(t, w.rev, g.rev, key)
				require.Equal(t, string(w.value), string(g.value), key)
				require.Equal(t, w.value == nil, g.value == nil, key)
			}
			require.Len(t, got, found)
		})
	}
}

// The end of a reply is read strictly: a continuation that finds fewer
// keys than the server said it had left out (the bucket changed), a
// reply that failed to load a message, or an unknown status is an error,
// never a key taken for absent.
func TestGetManyRefusesInconsistentEnds(t *testing.T) {
	status := func(code, desc string, kv ...string) *nats.Msg {
		m := nats.NewMsg("in.0")
		m.Header.Set("Status", code)
		m.Header.Set("Description", desc)
		for i := 0; i+1 < len(kv); i += 2 {
			m.Header.Set(kv[i], kv[i+1])
		}
		return m
	}
	value := func(key string, seq int) *nats.Msg {
		m := nats.NewMsg("in.0")
		m.Header.Set("Nats-Subject", "$KV.b."+key)
		m.Header.Set("Nats-Sequence", fmt.Sprint(seq))
		m.Data = []byte("v")
		return m
	}
	for _, tc := range []struct {
		name    string
		leftOut int // -1: a first ask
		msgs    []*nats.Msg
		err     string // "" when the reply ends well
		queued  []string
	}{
		{"first ask, all found", -1, []*nats.Msg{value("a", 1), value("b", 2), status("204", "EOB", headerNumPending, "0", headerUpToSeq, "9")}, "", nil},
		{"first ask, none exists", -1, []*nats.Msg{status("404", "No Results")}, "", nil},
		{"first ask cut short", -1, []*nats.Msg{value("a", 1), status("204", "EOB", headerNumPending, "1", headerUpToSeq, "9")}, "", []string{"b", "c"}},
		{"continuation finds what was left out", 2, []*nats.Msg{value("a", 1), status("204", "EOB", headerNumPending, "1", headerUpToSeq, "9")}, "", []string{"b", "c"}},
		{"continuation finds fewer", 2, []*nats.Msg{value("a", 1), status("204", "EOB", headerNumPending, "0", headerUpToSeq, "9")}, "the bucket changed", nil},
		{"continuation finds none", 1, []*nats.Msg{status("404", "No Results")}, "the bucket changed", nil},
		{"a message failed to load", -1, []*nats.Msg{status("404", "Message Not Found")}, "404 Message Not Found", nil},
		{"too many subjects", -1, []*nats.Msg{status("413", "Too Many Results")}, "413", nil},
		{"unreadable end", -1, []*nats.Msg{status("204", "EOB", headerNumPending, "x")}, "unreadable end of batch", nil},
		{"left out more than asked", -1, []*nats.Msg{value("a", 1), value("b", 1), value("c", 1), status("204", "EOB", headerNumPending, "1", headerUpToSeq, "9")}, "every key was answered", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &multiGet{keys: []string{"a", "b", "c"}, leftOut: tc.leftOut}
			r := &multiReader{b: &bucket{prefix: "$KV.b.", kv: fakeKV{}}, out: map[string]stored{}, inFlight: map[string]*multiGet{"in.0": g}}
			var err error
			for _, m := range tc.msgs {
				if err = r.receive(m); err != nil {
					break
				}
			}
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Empty(t, r.inFlight)
			if tc.queued == nil {
				require.Empty(t, r.queue)
				return
			}
			require.Len(t, r.queue, 1)
			require.Equal(t, tc.queued, r.queue[0].keys)
			require.Equal(t, uint64(9), r.queue[0].upTo, "a continuation is pinned to the first reply's sequence")
		})
	}
}

// fakeKV names a bucket for error messages; nothing else is called.
type fakeKV struct{ jetstream.KeyValue }

func (fakeKV) Bucket() string { return "b" }
