package projection

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/topology"
)

// The stored form of a record reads back to the same record: compact log
// entries (with and without their own provider and model), held totals,
// and entries the buggy test seam leaves unsorted and duplicated.
func TestRecordRoundTrip(t *testing.T) {
	r := NewRequest("req_7f3a9c2e", "agent-42_run-0007")
	r.Apply(evSpec{n: 1, session: "agent-42_run-0007", request: "req_7f3a9c2e", attempt: 0, in: 800, cacheRead: 12}.event())
	other := evSpec{n: 3, session: "agent-42_run-0007", request: "req_7f3a9c2e", attempt: 2, final: true, in: 5}.event()
	other.Provider, other.Model = "openai", "gpt-\"5\" <mini>"
	r.Apply(other)
	r.Apply(evSpec{n: 2, session: "agent-42_run-0007", request: "req_7f3a9c2e", attempt: 1, success: true, in: 800, out: 1200}.event())
	r.Seq = 123456
	r.Held = Totals{Requests: 1, Pending: 1, Attempts: 1, Billed: events.Usage{InputTokens: 800}}

	for _, rec := range []*Request{r, NewRequest("a", "b"), func() *Request {
		c := r.clone()
		c.Log = append(c.Log, c.Log[0])
		c.Log[1].Outcome = "weird"
		c.Held = Totals{}
		return c
	}()} {
		data, err := json.Marshal(rec)
		require.NoError(t, err)
		var back Request
		require.NoError(t, json.Unmarshal(data, &back), string(data))
		require.Equal(t, normalise(rec), normalise(&back), string(data))
		// Contract fields are plain JSON for any reader.
		var view RequestView
		require.NoError(t, json.Unmarshal(data, &view))
		require.Equal(t, rec.View().RequestID, view.RequestID)
		require.True(t, rec.FirstStartedAt.Equal(view.FirstStartedAt))
	}

	s := &Session{SessionView: SessionView{SessionID: "s-1", Totals: r.Contribution()}, Seq: 99}
	data, err := json.Marshal(s)
	require.NoError(t, err)
	var back Session
	require.NoError(t, json.Unmarshal(data, &back))
	require.Equal(t, *s, back)
}

// Records written by the previous layout (log entries as objects, held
// always present) are still read.
func TestRecordReadsObjectLog(t *testing.T) {
	old := `{"request_id":"r","session_id":"s","provider":"anthropic","model":"m","status":"succeeded","attempts":1,"winning_attempt":0,` +
		`"usage":{"input_tokens":1,"output_tokens":2,"cache_read_input_tokens":0,"cache_creation_input_tokens":0},` +
		`"billed":{"input_tokens":1,"output_tokens":2,"cache_read_input_tokens":0,"cache_creation_input_tokens":0},` +
		`"first_started_at":"2026-11-30T12:00:01Z","last_finished_at":"2026-11-30T12:00:02.5Z",` +
		`"log":[{"attempt":0,"event_id":"01M8P570G10000000000000000","outcome":"success","final":true,"provider":"anthropic","model":"m",` +
		`"usage":{"input_tokens":1,"output_tokens":2,"cache_read_input_tokens":0,"cache_creation_input_tokens":0},` +
		`"started_at":"2026-11-30T12:00:01Z","finished_at":"2026-11-30T12:00:02.5Z"}],"seq":7,` +
		`"held":{"requests":0,"succeeded":0,"failed":0,"pending":0,"attempts":0,"usage":{"input_tokens":0,"output_tokens":0,"cache_read_input_tokens":0,"cache_creation_input_tokens":0},"billed":{"input_tokens":0,"output_tokens":0,"cache_read_input_tokens":0,"cache_creation_input_tokens":0}}}`
	var r Request
	require.NoError(t, json.Unmarshal([]byte(old), &r))
	require.Len(t, r.Log, 1)
	require.Equal(t, events.OutcomeSuccess, r.Log[0].Outcome)
	require.Equal(t, "m", r.Log[0].Model)
	require.Equal(t, uint64(7), r.Seq)
	c := r.clone()
	c.derive()
	require.Equal(t, r.View(), c.View())
}

// normalise makes times comparable with ==.
func normalise(r *Request) Request {
	c := *r.clone()
	utc := func(t time.Time) time.Time { return t.UTC().Round(0) }
	c.FirstStartedAt, c.LastFinishedAt = utc(c.FirstStartedAt), utc(c.LastFinishedAt)
	for i := range c.Log {
		c.Log[i].StartedAt, c.Log[i].FinishedAt = utc(c.Log[i].StartedAt), utc(c.Log[i].FinishedAt)
	}
	if len(c.Log) == 0 {
		c.Log = nil
	}
	return c
}

// worstCaseRecord is a request record at least as large as any that wire
// contract v1 allows: IDs of 128 characters; 1,001 attempts (0 to 1000),
// every one but the winner with its own provider (64 bytes) and model (256
// bytes) made of control characters, which JSON escapes as \u00XX (six
// bytes each); the record's own provider and model alike; every token
// count at 10^12 (more than the contract allows: the two cache counts
// together may not exceed input_tokens), sums at 1,001 times that; times
// of the longest form; seq at its largest; every cost and money sum at
// 2^63-1 (a catalog's rates are not bounded); every attempt's input
// estimated at 10^12 (the estimate's "est" in each entry); 16 labels of
// the longest keys and values made of '<' (escaped as \u003c, six bytes
// each: api.Labels allows no control character), a label conflict on
// every attempt, the cell's provider and model of the longest and most
// escaped kind, and a held_cell beside the held.
func worstCaseRecord() *Request {
	long := func(c byte, n int) string { return string(bytes.Repeat([]byte{c}, n)) }
	distinct := func(i, n int) string {
		b := bytes.Repeat([]byte{0x01}, n)
		b[0], b[1], b[2] = byte(i%32), byte(i/32%32), 0x1f
		return string(b)
	}
	r := NewRequest(long('r', events.MaxIDLength), long('s', events.MaxIDLength))
	late := time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC)
	max := events.Usage{InputTokens: events.MaxTokens, OutputTokens: events.MaxTokens,
		CacheReadInputTokens: events.MaxTokens, CacheCreationInputTokens: events.MaxTokens,
		CacheCreation1hInputTokens: events.MaxTokens, ReasoningTokens: events.MaxTokens}
	for a := 0; a <= events.MaxAttempt; a++ {
		e := Entry{Attempt: a, EventID: ulidAt(a), Outcome: events.OutcomeError, Final: true,
			Provider: distinct(a, events.MaxProviderLength), Model: distinct(a, events.MaxModelLength),
			Usage: max, EstimatedInput: events.MaxTokens, StartedAt: late, FinishedAt: late, Cost: math.MaxInt64}
		if a == events.MaxAttempt {
			e.Outcome = events.OutcomeSuccess
			e.Provider, e.Model = long(0x02, events.MaxProviderLength), long(0x02, events.MaxModelLength)
		}
		e.LabelConflict = true
		r.Log = append(r.Log, e)
	}
	r.Labels = api.Labels{}
	for i := range api.MaxLabels {
		key := []byte(long('k', api.MaxLabelKeyLength))
		key[1] = byte('a' + i)
		r.Labels[string(key)] = long('<', api.MaxLabelValueLength)
	}
	r.Cell = &RecordCell{Hour: late.Truncate(time.Hour), Provider: long(0x03, events.MaxProviderLength), Model: long(0x03, events.MaxModelLength)}
	r.derive()
	r.Seq = math.MaxUint64
	r.Rules = 999
	r.Held = Totals{Requests: 1, Pending: 1, Attempts: events.MaxAttempt + 1, Usage: max, Billed: r.Billed,
		EstimatedInputTokens: r.EstimatedInputTokens,
		UsageCost:            math.MaxInt64, BilledCost: math.MaxInt64, UnpricedUsageTokens: math.MaxInt64, UnpricedBilledTokens: math.MaxInt64,
		LabelConflicts: math.MaxInt64}
	r.HeldCell = r.Held
	r.HeldCell.Requests = math.MaxInt64
	day, mh := r.HeldCell, r.HeldCell
	day.Succeeded = math.MaxInt64
	mh.Failed = math.MaxInt64
	r.setHelds(r.HeldCell, day, mh)
	return r
}

// What each rollup grain held for a request is written only when it
// differs from held_cell (as held_cell only when it differs from held),
// and reads back exactly in every combination.
func TestHeldGrainsRoundTrip(t *testing.T) {
	a := Totals{Requests: 1, Succeeded: 1, Attempts: 2}
	b := Totals{Requests: 1, Pending: 1, Attempts: 1}
	for _, tc := range []struct {
		name                    string
		held, cell, day, mh     Totals
		wantCell, wantDay, want bool // which fields are written: held_cell, held_day, held_model_hour
	}{
		{"all alike", a, a, a, a, false, false, false},
		{"all zero", Totals{}, Totals{}, Totals{}, Totals{}, false, false, false},
		{"the cells apart from the session", a, b, b, b, true, false, false},
		{"the day apart", a, a, b, a, false, true, false},
		{"the model-hour apart", a, a, a, b, false, false, true},
		{"each apart", Totals{}, a, b, Totals{}, true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Request{RequestView: RequestView{RequestID: "r", SessionID: "s"}, Seq: 4, Rules: RulesVersion,
				Held: tc.held}
			r.setHelds(tc.cell, tc.day, tc.mh)
			data := string(r.appendJSON(nil))
			require.Equal(t, tc.wantCell, strings.Contains(data, `"held_cell"`), data)
			require.Equal(t, tc.wantDay, strings.Contains(data, `"held_day"`), data)
			require.Equal(t, tc.want, strings.Contains(data, `"held_model_hour"`), data)
			var back Request
			require.NoError(t, json.Unmarshal([]byte(data), &back))
			require.Equal(t, [4]Totals{tc.held, tc.cell, tc.day, tc.mh}, [4]Totals{back.Held, back.HeldCell, back.heldIn(GrainDay), back.heldIn(GrainModelHour)})
			require.Equal(t, tc.day == tc.cell && tc.mh == tc.cell, back.heldGrains == nil, "kept apart only when they differ")
		})
	}
}

// The largest request record the contract allows stays within
// MaxRequestRecordBytes, which leaves room for the headers of a write
// under NATS's default max_payload of 1 MiB, and reads back exactly.
func TestWorstCaseRecordSize(t *testing.T) {
	r := worstCaseRecord()
	data := r.appendJSON(nil)
	t.Logf("worst-case request record: %d bytes (bound %d)", len(data), MaxRequestRecordBytes)
	require.LessOrEqual(t, len(data), MaxRequestRecordBytes)
	require.LessOrEqual(t, MaxRequestRecordBytes+64<<10, 1<<20, "the bound must leave 64 KiB for headers under a 1 MiB max_payload")
	var back Request
	require.NoError(t, json.Unmarshal(data, &back))
	require.Equal(t, normalise(r), normalise(&back))
	var view RequestView
	require.NoError(t, json.Unmarshal(data, &view))
	require.Equal(t, r.View().Model, view.Model, "the contract's model stays a plain JSON string")
}

// topology's check of a bucket's max value size agrees with the bound: a
// limit of MaxRequestRecordBytes and 4 KiB of headers takes the largest
// record, one byte less is named as too small.
func TestTopologyAgreesWithRecordBound(t *testing.T) {
	why := func(size int32) string {
		t.Helper()
		for _, d := range topology.Compare(topology.Config{}, jetstream.StreamConfig{Name: "KV_ledger_requests",
			MaxMsgsPerSubject: 1, Storage: jetstream.FileStorage, MaxMsgSize: size}) {
			if d.Setting == "max value size" {
				return d.Why
			}
		}
		t.Fatalf("no max value size difference for %d", size)
		return ""
	}
	require.NotContains(t, why(MaxRequestRecordBytes+4<<10), "below")
	require.Contains(t, why(MaxRequestRecordBytes+4<<10-1), "below")
}

// Providers and models of other attempts go into the name table: plain when
// JSON needs no escape for them, else in base64, byte for byte; entries
// that use the record's own provider and model carry no index.
func TestNameTableRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name, provider, model string
		plain                 bool // the model is written as it is
	}{
		{"plain ASCII", "openai", "gpt-4o-mini", true},
		{"plain non-ASCII", "ünïcode", "モデル-α", true},
		{"starts with the base64 mark", "=p", "=m", false},
		{"HTML characters", "a<b", "x&y>z", false},
		{"quote and backslash", `q"`, `back\slash`, false},
		{"control characters", "\x00\x01", "line\nbreak\ttab", false},
		{"line separator", "p\u2028", "m\u2029", false},
		{"empty", "", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRequest("req", "ses")
			r.Apply(evSpec{n: 1, session: "ses", request: "req", attempt: 0, in: 3}.event())
			odd := evSpec{n: 2, session: "ses", request: "req", attempt: 1, in: 4}.event()
			odd.Provider, odd.Model = tc.provider, tc.model
			r.Apply(odd)
			r.Apply(evSpec{n: 5, session: "ses", request: "req", attempt: 2, in: 5}.event()) // the record's: no index
			data := r.appendJSON(nil)
			var raw struct {
				Log   [][]json.RawMessage `json:"log"`
				Names []string            `json:"names"`
			}
			require.NoError(t, json.Unmarshal(data, &raw), string(data))
			require.Len(t, raw.Log[0], 10, string(data))
			require.Len(t, raw.Log[1], 12, string(data))
			require.Len(t, raw.Log[2], 10, string(data))
			require.Len(t, raw.Names, len(map[string]bool{tc.provider: true, tc.model: true}))
			require.Equal(t, tc.plain, raw.Names[len(raw.Names)-1] == tc.model, "names: %q", raw.Names)
			var back Request
			require.NoError(t, json.Unmarshal(data, &back), string(data))
			require.Equal(t, normalise(r), normalise(&back), string(data))
		})
	}
}

// Log entries that carry their provider and model as strings (the layout
// before the name table) are still read.
func TestRecordReadsInlineNames(t *testing.T) {
	old := `{"request_id":"r","session_id":"s","provider":"anthropic","model":"m","status":"pending","attempts":2,"winning_attempt":-1,` +
		`"usage":{"input_tokens":0,"output_tokens":0,"cache_read_input_tokens":0,"cache_creation_input_tokens":0},` +
		`"billed":{"input_tokens":3,"output_tokens":0,"cache_read_input_tokens":0,"cache_creation_input_tokens":0},` +
		`"first_started_at":"2026-11-30T12:00:01Z","last_finished_at":"2026-11-30T12:00:04Z",` +
		`"log":[[0,"01M8P570G10000000000000000",0,1,0,0,0,"2026-11-30T12:00:01Z","2026-11-30T12:00:02Z","openai","gpt-\u003c5\u003e"],` +
		`[1,"01M8P570G20000000000000000",0,2,0,0,0,"2026-11-30T12:00:03Z","2026-11-30T12:00:04Z"]],"seq":9}`
	var r Request
	require.NoError(t, json.Unmarshal([]byte(old), &r))
	require.Len(t, r.Log, 2)
	require.Equal(t, [2]string{"openai", "gpt-<5>"}, [2]string{r.Log[0].Provider, r.Log[0].Model})
	require.Equal(t, [2]string{"anthropic", "m"}, [2]string{r.Log[1].Provider, r.Log[1].Model})
	require.Zero(t, r.Rules, "a record written before versioning has rules 0")
	// Written again, it moves to the table and reads back the same.
	var back Request
	require.NoError(t, json.Unmarshal(r.appendJSON(nil), &back))
	require.Equal(t, normalise(&r), normalise(&back))
}

// A record whose table or indexes are damaged is refused with an error
// that says where, rather than read wrong.
func TestRecordRefusesBadNames(t *testing.T) {
	head := `{"request_id":"r","session_id":"s","provider":"p","model":"m","log":[[0,"01M8P570G10000000000000000",0,1,0,0,0,"2026-11-30T12:00:01Z","2026-11-30T12:00:02Z",`
	for _, tc := range []struct{ tail, want string }{
		{`0,1]],"names":["a"]}`, "index 1 outside the 1 names"},
		{`-1,0]],"names":["a"]}`, "index -1 outside"},
		{`0,0]],"names":["=not base64!"]}`, "names entry 0"},
		{`0,0]]}`, "index 0 outside the 0 names"},
	} {
		var r Request
		err := json.Unmarshal([]byte(head+tc.tail), &r)
		require.ErrorContains(t, err, tc.want, tc.tail)
	}
}

// Both records carry the rules version that wrote them; a record without
// the field (written before versioning) reads as 0.
func TestRecordRulesField(t *testing.T) {
	r := NewRequest("req", "ses")
	r.Apply(evSpec{n: 1, session: "ses", request: "req", attempt: 0, in: 3}.event())
	r.Rules = 7
	data := r.appendJSON(nil)
	require.Contains(t, string(data), `"rules":7`)
	var back Request
	require.NoError(t, json.Unmarshal(data, &back))
	require.Equal(t, 7, back.Rules)

	s := &Session{SessionView: SessionView{SessionID: "ses", Totals: r.Contribution()}, Seq: 4, Rules: 7}
	data = s.appendJSON(nil)
	require.Contains(t, string(data), `"rules":7`)
	var sback Session
	require.NoError(t, json.Unmarshal(data, &sback))
	require.Equal(t, *s, sback)

	var old Session
	require.NoError(t, json.Unmarshal([]byte(`{"session_id":"ses","requests":1,"seq":4}`), &old))
	require.Zero(t, old.Rules)
	var oldReq Request
	require.NoError(t, json.Unmarshal([]byte(`{"request_id":"r","session_id":"s","log":[],"seq":4}`), &oldReq))
	require.Zero(t, oldReq.Rules)
}

// Issue 20's fields read back: labels, label conflicts (the entry flag),
// the cell, and a held_cell that differs from held; a record without
// held_cell reads it as held; a rollup reads back whole.
func TestRecordLabelsAndCellRoundTrip(t *testing.T) {
	first := evSpec{n: 1, session: "s", request: "r", attempt: 0, in: 10, labels: api.Labels{"team": "search", "user": "u<42>"}}.event()
	other := evSpec{n: 2, session: "s", request: "r", attempt: 1, success: true, in: 10, out: 5, labels: api.Labels{"team": "ads"}, hour: 1}.event()
	r := NewRequest("r", "s")
	for _, ev := range []*events.Attempt{first, other} {
		ok, changed := Fold(r, ev, nil)
		require.True(t, ok && changed)
	}
	require.Equal(t, first.Labels, r.Labels)
	require.Equal(t, int64(1), r.LabelConflicts)
	require.Equal(t, &RecordCell{Hour: t0, Provider: first.Provider, Model: first.Model}, r.Cell)
	r.Held = r.Contribution()
	r.HeldCell = Totals{}
	data := r.appendJSON(nil)
	var back Request
	require.NoError(t, json.Unmarshal(data, &back), string(data))
	require.Equal(t, normalise(r), normalise(&back), string(data))
	require.Contains(t, string(data), `"labels":{"team":"search","user":"u\u003c42\u003e"},"label_conflicts":1,"cell":{"hour":"2026-11-30T12:00:00.000000000Z",`)

	r.HeldCell = r.Held
	data = r.appendJSON(nil)
	require.NotContains(t, string(data), "held_cell")
	back = Request{}
	require.NoError(t, json.Unmarshal(data, &back))
	require.Equal(t, r.Held, back.HeldCell)

	cell, ok := r.RollupCell()
	require.True(t, ok)
	c := &Rollup{Cell: cell, Totals: r.Contribution(), Seq: 9, Rules: RulesVersion}
	data, err := json.Marshal(c)
	require.NoError(t, err)
	var cb Rollup
	require.NoError(t, json.Unmarshal(data, &cb), string(data))
	require.Equal(t, *c, cb)
	require.Equal(t, int64(1), cb.Retries())
}

// A cell's key is its hour and a hash of its provider, model and labels:
// the same for the same cell whatever the labels' order, different when
// any part differs, and made of characters a KV key may hold.
func TestRollupKey(t *testing.T) {
	base := Cell{Hour: t0, Provider: "openai", Model: "gpt-4.1", Labels: api.Labels{"team": "search", "user": "u-1"}}
	key := base.Key()
	require.Regexp(t, `^2026113012\.[A-Z2-7]{52}$`, key)
	same := base
	same.Labels = api.Labels{"user": "u-1", "team": "search"}
	same.Hour = t0.Add(59 * time.Minute).Truncate(time.Hour).In(time.FixedZone("x", 3600))
	require.Equal(t, key, same.Key())
	for _, c := range []Cell{
		{Hour: t0.Add(time.Hour), Provider: "openai", Model: "gpt-4.1", Labels: base.Labels},
		{Hour: t0, Provider: "openai", Model: "gpt-4.1"},
		{Hour: t0, Provider: "openai", Model: "gpt-4.1-mini", Labels: base.Labels},
		{Hour: t0, Provider: "openaig", Model: "pt-4.1", Labels: base.Labels},
		{Hour: t0, Provider: "openai", Model: "gpt-4.1", Labels: api.Labels{"team": "searchuser", "": "u-1"}},
	} {
		require.NotEqual(t, key, c.Key(), "%+v", c)
	}
}
