package projection

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
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
